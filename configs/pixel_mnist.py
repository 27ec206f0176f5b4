"""Pixel-by-pixel MNIST (sMNIST, T = 784): the permuted task's setting with the pixels
in reading order, expRNN's learning rates for it (7e-4, the Lie-algebra coefficients at
7e-5), and the guRNN's initial phases in (-π/2, π/2), where expRNN's Cayley init puts
the orthogonal RNN's eigenphases: on this task they train faster and end higher than
phases in (-π, π) (docs/results_log.md, pixel-by-pixel MNIST and Fashion-MNIST)."""

from lie_unitary.experiments import launch


def get_config():
  c = launch.sibling(__file__, "permuted_mnist")
  c.variant = "pixel_mnist"
  c.task = "pixel"
  for m in ("gurnn", "orthogonal"):
    c.models[m].learning_rate = 7e-4
    c.models[m].lambda_learning_rate = 7e-5
  c.lambda_phase_range = 1.5708  # π/2 to 4 decimals, as the recorded runs gave it
  return c
