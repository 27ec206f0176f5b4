"""The memory (copy) problem at T = 100 (paper §4, Figure 3 right): guRNN_β (β = 1.05, tanh).

3 replicates, 50,000 updates of batch 20. Figure 3's other curves as for adding
(urnn: n = 128). Runtimes and results: docs/rnn.md.
"""

from lie_unitary.experiments.rnn import config as rnn


def get_config():
  c = rnn.defaults()
  c.variant = "memory"
  c.task = "memory"
  c.models = rnn.paper_models("memory")
  c.model = ("gurnn_beta",)
  c.T = (100,)
  return c
