"""Beyond the paper: recovering a hidden subalgebra shared by many operators.

m = 16 operators U_i = expm(Σ_j c_ij G*_j) share k = 3 hidden generators of u(6); each
has two noisy pairs (24 real equations, fewer than u(6)'s 36 coefficients). Around this
centre, the cells that change one field (pairs, m, k, subalgebra, coef_std, n) and one
that changes n and m together; 8 replicates; learned, full, random_fixed, oracle and
procrustes each a unit (Adam, 2000 full-batch steps, rates 1e-2 and 3e-2, learned from 3
random starts).

    JAX_DISABLE_MOST_OPTIMIZATIONS=true python -m lie_unitary.experiments.basis \\
        --config=basis --cpu_devices=1 --workdir=runs/learned_basis

About 20 minutes on one CPU core (the environment variable cuts each unit's compilation
from about 10 s to 2 s); results in docs/learned_basis.md.
"""

from lie_unitary.experiments import fields
from lie_unitary.experiments.basis import config as basis


def get_config():
  c = fields.defaults(basis.FIELDS)
  c.variant = "basis"
  c.n, c.k, c.m, c.pairs, c.subalgebra, c.coef_std = 6, 3, 16, 2, "general", 1.0
  c.sweeps = (("pairs", (1, 4, 8, 32)), ("m", (1, 4, 64)), ("k", (2, 6)),
              ("subalgebra", ("commuting",)), ("coef_std", (0.5,)), ("n", (8, 14, 20)),
              (("n", "m"), ((20, 32),)))
  c.num_replicates = 8
  c.num_steps = 2000
  c.learning_rates = (1e-2, 3e-2)
  c.restarts = 3
  return c
