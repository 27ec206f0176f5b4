"""Beyond the paper: n ∈ {32, 64, 128}, Haar targets, every approach, RMSProp.

3 replicates, one epoch; the principal-branch approaches (lie_zero_init,
lie_haar_init, lie_recentred, lie_rebased, lie_rebased_orthonormal) beside the paper's.
"""

from lie_unitary.experiments.operators import config as operators


def get_config():
  c = operators.defaults()
  c.variant = "large"
  c.n_values = (32, 64, 128)
  c.approaches = ("true", "rand", "lstsq", "procrustes", "projection", "arjovsky",
                  "lie_restricted", "lie_algebra", "lie_zero_init", "lie_haar_init",
                  "lie_recentred", "lie_rebased", "lie_rebased_orthonormal")
  c.generators = ("haar",)
  c.optimizer = "rmsprop"
  c.num_replicates = 3
  c.num_epochs = ((0, 1),)
  return c
