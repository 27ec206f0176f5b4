"""Beyond the paper: the adding task at T = 750 and 1000.

guRNN₁ (β = 1: relu with β = 1.4 over 750+ steps invites overflow) started at U = I
(λ = 0), relu, h0 = 0: an IRNN whose recurrence stays unitary, so it cannot blow up
as the IRNN does at T = 1000. λ in RMSProp; the learning rate divided by 10 at 45,000
and 65,000 of 80,000 updates. Results: docs/rnn.md.
"""

from lie_unitary.experiments import fields


def get_config():
  c = fields.sibling(__file__, "adding")
  c.variant = "adding_long"
  c.model = ("gurnn",)
  c.T = (750, 1000)
  c.h0 = "zeros"
  c.models.gurnn.activation = "relu"
  c.lambda_init_std = 0.0
  c.lambda_optimizer = "rmsprop"
  c.num_updates = 80_000
  c.lr_drops = (45_000, 65_000)
  c.num_replicates = 1
  return c
