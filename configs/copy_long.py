"""Beyond the paper: the memory task at T = 1000 and 2000, in later unitary-RNN work's setting.

guRNN₁ with n = 64 complex units, modReLU, the diagonal-phases λ init (Henaff et al.),
h0 = 0, batch 128, RMSProp at 2e-4 (λ at 2e-5, its own RMSProp), as expRNN's copy task.
Baselines 0.0204 and 0.0103. Results: docs/rnn.md.
"""

from lie_unitary.experiments import fields


def get_config():
  c = fields.sibling(__file__, "memory")
  c.variant = "copy_long"
  c.model = ("gurnn",)
  c.T = (1000, 2000)
  c.models.gurnn.hidden_size = 64
  c.models.gurnn.activation = "modrelu"
  c.models.gurnn.learning_rate = 2e-4
  c.models.gurnn.lambda_learning_rate = 2e-5
  c.batch_size = 128
  c.h0 = "zeros"
  c.lambda_init = "phases"
  c.lambda_optimizer = "rmsprop"
  c.num_updates = 3_000
  c.num_replicates = 1
  return c
