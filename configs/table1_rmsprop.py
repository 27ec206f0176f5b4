"""Table 1 with RMSProp (decay 0.9, no momentum) instead of SGD, one epoch per n."""

from lie_unitary.experiments import fields


def get_config():
  c = fields.sibling(__file__, "table1")
  c.variant = "table1_rmsprop"
  c.optimizer = "rmsprop"
  c.num_epochs = ((0, 1),)
  return c
