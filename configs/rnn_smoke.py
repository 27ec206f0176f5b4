"""A few seconds per model on the adding task at T = 10 (``--config=rnn_smoke`` of the RNN
launcher; the tests use it)."""

from lie_unitary.experiments import fields


def get_config():
  c = fields.sibling(__file__, "adding")
  c.variant = "smoke"
  c.T = (10,)
  for m in c.models.values():
    m.hidden_size = 8
    m.learning_rate = 1e-2
    if "lambda_learning_rate" in m:
      m.lambda_learning_rate = 1e-2
  c.num_updates = 60
  c.num_replicates = 2
  c.val_every = 20
  c.val_size = 40
  c.eval_size = 80
  c.eval_batch_size = 40
  c.num_train = 0
  return c
