"""Pixel-by-pixel MNIST (sMNIST, T = 784): the permuted task's setting (the guRNN's
initial phases in (-π/2, π/2) among it) with the pixels in reading order and expRNN's
learning rates for it (7e-4, the Lie-algebra coefficients at 7e-5)."""

from lie_unitary.experiments import fields


def get_config():
  c = fields.sibling(__file__, "permuted_mnist")
  c.variant = "pixel_mnist"
  c.task = "pixel"
  for m in ("gurnn", "orthogonal"):
    c.models[m].learning_rate = 7e-4
    c.models[m].lambda_learning_rate = 7e-5
  return c
