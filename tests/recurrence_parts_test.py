"""Tests of the pieces the scan and the fused recurrence kernels share.

References are independent of the code under test: autodiff of the activations and of
`modrelu_pairs` (a separate function), and sums written as explicit loops in NumPy.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary.nn import recurrence
from lie_unitary.nn import recurrence_parts as parts


@pytest.mark.parametrize("name", ["relu", "tanh", "identity"])
def test_activation_derivative_from_output_matches_autodiff(x64, name):
  a = jnp.linspace(-2.0, 2.0, 41) + 0.013  # no a = 0, where relu has no derivative
  f = recurrence.elementwise_activation(name)
  expected = jax.vmap(jax.grad(f))(a)
  ours = parts.activation_derivative_from_output(name, f(a))
  np.testing.assert_allclose(ours, expected, rtol=1e-12, atol=1e-12)
  assert ours.dtype == a.dtype


def test_activation_derivative_from_output_unknown_name():
  with pytest.raises(ValueError, match="unknown activation 'gelu'"):
    parts.activation_derivative_from_output("gelu", jnp.zeros(3))


def test_transition_cotangent_is_the_sum_over_steps(x64):
  k = jax.random.split(jax.random.key(0), 3)
  L, B, H = 5, 3, 4
  h0 = jax.random.normal(k[0], (B, H))
  hs = jax.random.normal(k[1], (L, B, H))
  deltas = jax.random.normal(k[2], (L, B, H))
  previous = np.concatenate([np.asarray(h0)[None], np.asarray(hs)[:-1]])
  expected = sum(previous[t].T @ np.asarray(deltas)[t] for t in range(L))
  np.testing.assert_allclose(parts.transition_cotangent(h0, hs, deltas), expected,
                             rtol=1e-12, atol=1e-12)


def test_shape_checks():
  w, h0, p, bias = jnp.eye(4), jnp.zeros((2, 4)), jnp.zeros((3, 2, 4)), jnp.zeros(2)
  parts.check_recurrence_shapes(w, h0, p)
  parts.check_modrelu_shapes(w, h0, p, bias)
  for args in ((w[:3], h0, p), (w, h0[0], p), (w, h0, p[0]), (w, h0, p[:, :1])):
    with pytest.raises(ValueError, match=r"expected \(H, H\), \(B, H\), \(L, B, H\)"):
      parts.check_recurrence_shapes(*args)
  for bad_bias in (jnp.zeros(4), jnp.zeros((2, 1))):
    with pytest.raises(ValueError, match=r"bias \(H / 2,\)"):
      parts.check_modrelu_shapes(w, h0, p, bad_bias)


def test_modrelu_offloop_cotangents_of_one_step(x64):
  """One step (L = 1): b̄ and δ against autodiff of `modrelu_pairs`, W̄ and h̄_0 as products."""
  k = jax.random.split(jax.random.key(1), 5)
  B, n = 6, 3
  z = jax.random.normal(k[0], (B, 2 * n))
  bias = jnp.array([-0.3, 0.2, -5.0])  # the last unit inactive everywhere
  v = jax.random.normal(k[1], (B, 2 * n))
  w = jax.random.normal(k[2], (2 * n, 2 * n))
  h0 = jax.random.normal(k[3], (B, 2 * n))
  out, vjp = jax.vjp(recurrence.modrelu_pairs, z, bias)
  delta, ct_bias = vjp(v)
  r = jnp.sqrt(z[:, :n] ** 2 + z[:, n:] ** 2 + parts.MODRELU_EPS)

  ct_w, ct_h0, ct_p, ours_bias = parts.modrelu_offloop_cotangents(
      w, h0, out[None], r[None], bias, delta[None])
  np.testing.assert_allclose(ours_bias, ct_bias, rtol=1e-10, atol=1e-12)
  np.testing.assert_allclose(ct_w, np.asarray(h0).T @ np.asarray(delta), rtol=1e-12)
  np.testing.assert_allclose(ct_h0, np.asarray(delta) @ np.asarray(w).T, rtol=1e-12)
  np.testing.assert_allclose(ct_p[0], delta)

  pre, s, coef, active = parts.modrelu_pre_activations(out, r, bias)
  on = np.concatenate([active, active], axis=-1)
  np.testing.assert_allclose(np.where(on, pre, 0), np.where(on, z, 0), rtol=1e-12)
  np.testing.assert_allclose(s, jax.nn.relu(r + bias) / r, rtol=1e-12)
  # Jᵀ v = s v + coef · z (z·v) per unit, against autodiff's δ.
  zv = z[:, :n] * v[:, :n] + z[:, n:] * v[:, n:]
  two = lambda a: jnp.concatenate([a, a], axis=-1)
  np.testing.assert_allclose(two(s) * v + two(coef * zv) * z, delta, rtol=1e-10, atol=1e-12)
  assert not active[:, 2].any()
