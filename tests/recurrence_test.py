"""Tests of the recurrence kernels: hand-written reverse passes against autodiff."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary import nn as lnn


pytestmark = pytest.mark.usefixtures("fast_compiles")


@pytest.mark.parametrize("activation", ["relu", "tanh", "identity"])
def test_elementwise_recurrence_gradient_matches_autodiff(activation):
  k = jax.random.split(jax.random.key(0), 4)
  L, B, H = 9, 3, 5
  w = jax.random.normal(k[0], (H, H), jnp.float64 if jax.config.x64_enabled else jnp.float32)
  w = w / math.sqrt(H) * 1.3
  h0 = jax.random.normal(k[1], (B, H))
  p = jax.random.normal(k[2], (L, B, H))
  weights = jax.random.normal(k[3], (L, B, H))
  f = {"relu": nn.relu, "tanh": jnp.tanh, "identity": lambda a: a}[activation]

  def reference(w, h0, p):
    def body(h, p_t):
      h = f(h @ w + p_t)
      return h, h
    return jax.lax.scan(body, h0, p)[1]

  def loss(fn, *args):
    return jnp.sum(jnp.sin(fn(*args)) * weights)

  ours = jax.grad(lambda *a: loss(lambda *b: lnn.elementwise_recurrence(*b, activation), *a),
                  argnums=(0, 1, 2))(w, h0, p)
  ref = jax.grad(lambda *a: loss(reference, *a), argnums=(0, 1, 2))(w, h0, p)
  np.testing.assert_allclose(lnn.elementwise_recurrence(w, h0, p, activation),
                             reference(w, h0, p), atol=1e-5)
  for a, b in zip(ours, ref):
    assert float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b)) < 1e-5
  with pytest.raises(ValueError, match="expected"):
    lnn.elementwise_recurrence(w, h0, p[:, :, :2], activation)


def test_modrelu_recurrence_gradient_matches_autodiff():
  # The hand-written reverse pass of the modReLU recurrence against autodiff of the
  # same loop written with `lnn.modrelu` on complex numbers; biases straddle -|z|.
  k = jax.random.split(jax.random.key(0), 5)
  L, B, n = 9, 3, 4
  w = jax.random.normal(k[0], (2 * n, 2 * n)) / math.sqrt(2 * n) * 1.3
  h0 = jax.random.normal(k[1], (B, 2 * n))
  p = jax.random.normal(k[2], (L, B, 2 * n))
  bias = jnp.array([-0.8, -0.1, 0.0, 0.3])
  weights = jax.random.normal(k[3], (L, B, 2 * n))

  def reference(w, h0, p, bias):
    def body(h, p_t):
      a = h @ w + p_t
      z = lnn.modrelu(a[:, :n] + 1j * a[:, n:], bias)
      h = jnp.concatenate([jnp.real(z), jnp.imag(z)], -1)
      return h, h
    return jax.lax.scan(body, h0, p)[1]

  loss = lambda fn, *args: jnp.sum(jnp.sin(fn(*args)) * weights)
  ours_fn = lambda *a: lnn.modrelu_recurrence(*a, 1)
  np.testing.assert_allclose(ours_fn(w, h0, p, bias), reference(w, h0, p, bias), atol=1e-5)
  ours = jax.grad(lambda *a: loss(ours_fn, *a), argnums=(0, 1, 2, 3))(w, h0, p, bias)
  ref = jax.grad(lambda *a: loss(reference, *a), argnums=(0, 1, 2, 3))(w, h0, p, bias)
  for a, b in zip(ours, ref):
    assert float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b)) < 1e-4
