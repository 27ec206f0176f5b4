"""A tiny Table 1 (n ∈ {3, 4}, 2,000 pairs, 3 replicates): nearly all compilation.

``--config=operators_smoke`` of the operators launcher; the tests use it.
"""

from lie_unitary.experiments import fields


def get_config():
  c = fields.sibling(__file__, "table1")
  c.variant = "smoke"
  c.n_values = (3, 4)
  c.num_replicates = 3
  c.num_epochs = ((0, 1), (4, 2))
  c.num_train = 2_000
  c.num_val = 500
  c.num_test = 500
  c.val_every = 25
  c.val_subsample = 200
  return c
