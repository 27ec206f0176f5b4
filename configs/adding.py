"""The adding problem at T = 100 (paper §4, Figure 3 left): guRNN_β (β = 1.4, relu).

3 replicates, 50,000 updates of batch 20, RMSProp. Figure 3's other curves: add
``--config.model=gurnn,lstm,irnn,tanh --config.num_replicates=1`` into the same
workdir (and urnn for the ruRNN, n = 512). Runtimes and results: docs/rnn.md.
"""

from lie_unitary.experiments.rnn import config as rnn


def get_config():
  c = rnn.defaults()
  c.variant = "adding"
  c.task = "adding"
  c.models = rnn.paper_models("adding")
  c.model = ("gurnn_beta",)
  c.T = (100,)
  return c
