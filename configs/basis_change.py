"""Appendix B at n = 6: a change of basis λ = λ̃ᵀ M slows learning, a smaller rate helps.

Rows c ∈ {0, 5, 10, 20} (M ~ U(-c, c), drawn once per c), columns learning rates
1e-3 / {1, 5²/2, 10²/2, 20²/2} as the original code; target λ ~ N(0, 0.01²),
3 replicates, one epoch of SGD.
"""

from lie_unitary.experiments.operators import config as operators


def get_config():
  c = operators.defaults()
  c.variant = "basis_change"
  c.n_values = (6,)
  c.approaches = ("true", "rand", "lie_algebra")
  c.generators = ("lie",)
  c.lie_target_std = 0.01
  c.num_replicates = 3
  c.num_epochs = ((0, 1),)
  c.basis_scales = (0.0, 5.0, 10.0, 20.0)
  c.lr_divisors = (1.0, 5.0 ** 2 / 2, 10.0 ** 2 / 2, 20.0 ** 2 / 2)
  return c
