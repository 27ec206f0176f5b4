"""A tiny hidden-subalgebra run (n = 3, k = 2, 4 operators, 50 steps, 2 replicates):
nearly all compilation. ``--config=basis_smoke`` of the basis launcher; the tests use it.
"""

from lie_unitary.experiments import fields


def get_config():
  c = fields.sibling(__file__, "basis")
  c.variant = "smoke"
  c.n, c.k, c.m, c.pairs = 3, 2, 4, 2
  c.sweeps = (("pairs", (1,)),)
  c.num_replicates = 2
  c.num_steps = 50
  c.num_val, c.num_test = 8, 16
  c.learning_rates = (3e-2,)
  c.restarts = 2
  return c
