"""Table 1 as the paper ran it (§3): U(n) targets from three generators, SGD.

18 replicates (generators lie / qr / composition cycled), n ∈ {3, 6, 8, 14, 20},
projection, arjovsky and lie_algebra beside the baselines (the true matrix, a fresh
draw, least squares, and procrustes: the least-squares unitary). Epochs per n land
lie_algebra and arjovsky in the band of the paper's Tables 1-2 with SGD at 1e-3 (one
epoch is too few from n = 8 on): runtime and results in docs/reproduction.md.
"""

from lie_unitary.experiments.operators import config as operators


def get_config():
  c = operators.defaults()
  c.variant = "table1"
  c.n_values = (3, 6, 8, 14, 20)
  c.approaches = ("true", "rand", "lstsq", "procrustes", "projection", "arjovsky",
                  "lie_algebra")
  c.generators = ("lie", "qr", "composition")
  c.num_replicates = 18
  c.num_epochs = ((3, 1), (6, 1), (8, 3), (14, 3), (20, 4))
  c.optimizer = "sgd"
  c.learning_rate = 1e-3
  return c
