"""Beyond the paper: real SO(n) targets, so(n) coefficients vs projection onto O(n).

Haar and lie targets with real x and noise, n ∈ {6, 20, 64}, RMSProp, 6 replicates,
one epoch.
"""

from lie_unitary.experiments.operators import config as operators


def get_config():
  c = operators.defaults()
  c.variant = "orthogonal"
  c.field = "real"
  c.n_values = (6, 20, 64)
  c.approaches = ("true", "rand", "lstsq", "procrustes", "projection_orthogonal", "so_algebra")
  c.generators = ("haar", "lie")
  c.optimizer = "rmsprop"
  c.num_replicates = 6
  c.num_epochs = ((0, 1),)
  return c
