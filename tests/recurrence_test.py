"""Tests of the recurrence kernels: hand-written reverse passes against autodiff.

Each kernel runs with and without jit (`chex.variants`): the custom VJPs must give the
same cotangents as autodiff of a plain `lax.scan` either way, and the shape checks
raise ValueError at trace time under jit too.
"""

import math

from absl.testing import parameterized
import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary import nn as lnn
from lie_unitary.nn import recurrence

pytestmark = pytest.mark.usefixtures("fast_compiles")


def _modrelu_pairs_scan(w, h0, p, bias, eps=1e-5):
  """h_t = modReLU(h_{t-1} @ w + p_t) on [Re | Im] pairs, written out: (L, B, 2n)."""
  n = bias.shape[0]

  def body(h, p_t):
    a = h @ w + p_t
    x, y = a[:, :n], a[:, n:]
    r = jnp.sqrt(x * x + y * y + eps)
    # modReLU's derivative at z = 0 exactly is taken as 0 (its output is 0 there).
    s = jnp.where((x != 0) | (y != 0), jnp.maximum(r + bias, 0.0) / r, 0.0)
    h = jnp.concatenate([s * x, s * y], -1)
    return h, h

  return jax.lax.scan(body, h0, p)[1]


def _assert_float64_cotangents_match(ours_fn, reference, args, weights):
  """Every cotangent of Σ sin(f(W, h0, p, b)) ⊙ weights: ours against jax.grad of the
  reference loop, to float64 accuracy. Returns ours."""
  loss = lambda fn, *a: jnp.sum(jnp.sin(fn(*a)) * weights)
  argnums = tuple(range(len(args)))
  ours = jax.grad(lambda *a: loss(ours_fn, *a), argnums=argnums)(*args)
  ref = jax.grad(lambda *a: loss(reference, *a), argnums=argnums)(*args)
  for name, a, b in zip(("W", "h0", "p", "bias"), ours, ref):
    chex.assert_equal_shape([a, b])
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)
  return ours


class ElementwiseRecurrenceTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters("relu", "tanh", "identity")
  def test_gradient_matches_autodiff(self, activation):
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

    ours_fn = self.variant(lambda *b: lnn.elementwise_recurrence(*b, activation))
    ours = jax.grad(lambda *a: loss(ours_fn, *a), argnums=(0, 1, 2))(w, h0, p)
    ref = jax.grad(lambda *a: loss(reference, *a), argnums=(0, 1, 2))(w, h0, p)
    np.testing.assert_allclose(ours_fn(w, h0, p), reference(w, h0, p), atol=1e-5)
    for a, b in zip(ours, ref):
      assert float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b)) < 1e-5
    with pytest.raises(ValueError, match="expected"):
      ours_fn(w, h0, p[:, :, :2])

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters("relu", "tanh", "identity")
  def test_direct_call_matches_grad_of_plain_scan_in_float64(self, activation):
    # Unroll 2 with L odd, to float64 accuracy: f' read off the outputs h, and W̄ formed
    # as one matmul after the loop, against autodiff's step-by-step sum.
    with jax.enable_x64(True):
      k = jax.random.split(jax.random.key(3), 4)
      L, B, H = 7, 3, 5
      w = jax.random.normal(k[0], (H, H), jnp.float64) / math.sqrt(H)
      h0 = jax.random.normal(k[1], (B, H), jnp.float64)
      p = jax.random.normal(k[2], (L, B, H), jnp.float64)
      weights = jax.random.normal(k[3], (L, B, H), jnp.float64)
      f = {"relu": nn.relu, "tanh": jnp.tanh, "identity": lambda a: a}[activation]

      def reference(w, h0, p):
        def body(h, p_t):
          h = f(h @ w + p_t)
          return h, h
        return jax.lax.scan(body, h0, p)[1]

      ours_fn = self.variant(lambda *a: lnn.elementwise_recurrence(*a, activation, unroll=2))
      hs = ours_fn(w, h0, p)
      chex.assert_type(hs, jnp.float64)
      np.testing.assert_allclose(hs, reference(w, h0, p), rtol=1e-12, atol=1e-12)
      _assert_float64_cotangents_match(ours_fn, reference, (w, h0, p), weights)

  @chex.variants(with_jit=True, without_jit=True)
  def test_bad_arguments_raise_value_error(self):
    w, h0, p = jnp.eye(4), jnp.zeros((2, 4)), jnp.zeros((3, 2, 4))
    for args in ((w[:, :3], h0, p), (w, h0[0], p), (w, h0, p[0]), (w, h0[:1], p)):
      with pytest.raises(ValueError, match="expected"):
        self.variant(lnn.elementwise_recurrence)(*args)
    with pytest.raises(ValueError, match="activation"):
      self.variant(lambda *a: lnn.elementwise_recurrence(*a, "gelu"))(w, h0, p)


class ModReLURecurrenceTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_gradient_matches_autodiff_of_complex_modrelu(self):
    # The hand-written reverse pass of the modReLU recurrence against autodiff of the
    # same loop written with `modrelu` on complex numbers; biases straddle -|z|.
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
    ours_fn = self.variant(lambda *a: lnn.modrelu_recurrence(*a, 1))
    # float32 states grow to ~1e2 here: relative agreement (hosts round differently).
    np.testing.assert_allclose(ours_fn(w, h0, p, bias), reference(w, h0, p, bias), rtol=2e-5,
                               atol=1e-5)
    ours = jax.grad(lambda *a: loss(ours_fn, *a), argnums=(0, 1, 2, 3))(w, h0, p, bias)
    ref = jax.grad(lambda *a: loss(reference, *a), argnums=(0, 1, 2, 3))(w, h0, p, bias)
    for a, b in zip(ours, ref):
      assert float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b)) < 1e-4

  @chex.variants(with_jit=True, without_jit=True)
  def test_a_state_held_at_zero_passes_no_gradient(self):
    # h0 = 0 and 300 zero inputs (a blank image row's worth and more) keep the state at
    # exactly 0, where modReLU with b > 0 jumps: its derivative there is 0, so the
    # cotangents stay finite and those inputs get none. (The eps-smoothed derivative,
    # 1 + b/sqrt(eps) ≈ 4.2 a step, overflows float32 to inf, and inf · 0 = nan in W̄.)
    k = jax.random.split(jax.random.key(2), 3)
    L0, L, B, n = 300, 310, 2, 3
    w = jnp.linalg.qr(jax.random.normal(k[0], (2 * n, 2 * n)))[0]
    p = jnp.zeros((L, B, 2 * n)).at[L0:].set(jax.random.normal(k[1], (L - L0, B, 2 * n)))
    h0 = jnp.zeros((B, 2 * n))
    bias = jnp.array([0.01, 0.01, -0.01])
    weights = jax.random.normal(k[2], (L, B, 2 * n))
    loss = lambda fn, *a: jnp.sum(jnp.sin(fn(*a)) * weights)
    ours_fn = self.variant(lambda *a: lnn.modrelu_recurrence(*a, 1))
    hs = ours_fn(w, h0, p, bias)
    np.testing.assert_array_equal(hs[:L0], 0.0)
    grads = jax.grad(lambda *a: loss(ours_fn, *a), argnums=(0, 1, 2, 3))(w, h0, p, bias)
    for g in grads:
      assert bool(jnp.all(jnp.isfinite(g)))
    np.testing.assert_array_equal(grads[2][:L0], 0.0)
    assert float(jnp.abs(grads[2][L0:]).max()) > 0
    ref = jax.grad(lambda *a: loss(_modrelu_pairs_scan, *a),
                   argnums=(0, 1, 2, 3))(w, h0, p, bias)
    for a, b in zip(grads, ref):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # The complex `modrelu` and `modrelu_pairs` take the same value at 0: no gradient.
    def complex_modrelu(a):
      z = lnn.modrelu(a[:n] + 1j * a[n:], bias)
      return jnp.concatenate([jnp.real(z), jnp.imag(z)])

    np.testing.assert_array_equal(jax.jacobian(complex_modrelu)(jnp.zeros(2 * n)), 0.0)
    pairs = jax.jacobian(lambda a: recurrence.modrelu_pairs(a, bias))(jnp.zeros(2 * n))
    np.testing.assert_array_equal(pairs, 0.0)

  @chex.variants(with_jit=True, without_jit=True)
  def test_one_step_matches_autodiff_of_modrelu_pairs(self):
    # L = 1: the cotangents formed after the reverse loop (W̄, h̄_0, p̄, and b̄ with each
    # unit's z·v read off δ) against autodiff of `modrelu_pairs` itself.
    with jax.enable_x64(True):
      k = jax.random.split(jax.random.key(4), 4)
      B, n = 6, 3
      w = jax.random.normal(k[0], (2 * n, 2 * n), jnp.float64)
      h0 = jax.random.normal(k[1], (B, 2 * n), jnp.float64)
      p = jax.random.normal(k[2], (1, B, 2 * n), jnp.float64)
      bias = jnp.array([-0.3, 0.2, -50.0])  # the last unit inactive everywhere
      weights = jax.random.normal(k[3], (1, B, 2 * n), jnp.float64)

      def reference(w, h0, p, bias):
        return recurrence.modrelu_pairs(h0 @ w + p[0], bias)[None]

      ours_fn = self.variant(lnn.modrelu_recurrence)
      np.testing.assert_allclose(ours_fn(w, h0, p, bias), reference(w, h0, p, bias),
                                 rtol=1e-12, atol=1e-12)
      ours = _assert_float64_cotangents_match(ours_fn, reference, (w, h0, p, bias), weights)
      assert float(ours[3][2]) == 0.0  # an inactive unit's bias gets no gradient

  @chex.variants(with_jit=True, without_jit=True)
  def test_direct_call_matches_grad_of_plain_scan_in_float64(self):
    # `modrelu_recurrence` called directly (unroll 2, L odd) against jax.grad through a
    # plain lax.scan written here on real pairs: all four cotangents, to float64 accuracy.
    with jax.enable_x64(True):
      k = jax.random.split(jax.random.key(1), 5)
      L, B, n = 7, 2, 3
      w = jax.random.normal(k[0], (2 * n, 2 * n), jnp.float64) / math.sqrt(2 * n)
      h0 = jax.random.normal(k[1], (B, 2 * n), jnp.float64)
      p = jax.random.normal(k[2], (L, B, 2 * n), jnp.float64)
      bias = jnp.array([-10.0, -0.2, 0.1])  # the first unit is always off
      weights = jax.random.normal(k[3], (L, B, 2 * n), jnp.float64)

      reference = _modrelu_pairs_scan
      ours_fn = self.variant(lambda *a: lnn.modrelu_recurrence(*a, unroll=2))
      hs = ours_fn(w, h0, p, bias)
      chex.assert_shape(hs, (L, B, 2 * n))
      chex.assert_type(hs, jnp.float64)
      np.testing.assert_allclose(hs, reference(w, h0, p, bias), rtol=1e-12, atol=1e-12)
      np.testing.assert_array_equal(hs[:, :, 0], 0.0)
      ours = _assert_float64_cotangents_match(ours_fn, reference, (w, h0, p, bias), weights)
      assert float(ours[3][0]) == 0.0  # an inactive unit's bias gets no gradient

  @chex.variants(with_jit=True, without_jit=True)
  def test_bad_shapes_raise_value_error(self):
    n = 3
    w, h0 = jnp.eye(2 * n), jnp.zeros((2, 2 * n))
    p, bias = jnp.zeros((4, 2, 2 * n)), jnp.zeros((n,))
    for args in ((w[:, :5], h0, p, bias), (w, h0[0], p, bias), (w, h0, p[..., :5], bias),
                 (w, h0, p, bias[:2]), (w, h0, p, jnp.zeros((1, n))),
                 (jnp.eye(5), jnp.zeros((2, 5)), jnp.zeros((4, 2, 5)), bias)):
      with pytest.raises(ValueError, match="expected"):
        self.variant(lnn.modrelu_recurrence)(*args)


class RealModReLURecurrenceTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_matches_grad_of_plain_scan_in_float64(self):
    # Against jax.grad through a plain lax.scan of sign(z)·relu(|z| + b) written here:
    # all four cotangents, unroll 2 with L odd, one unit always off, biases of both signs.
    with jax.enable_x64(True):
      k = jax.random.split(jax.random.key(2), 4)
      L, B, H = 7, 3, 5
      w = jax.random.normal(k[0], (H, H), jnp.float64) / math.sqrt(H)
      h0 = jax.random.normal(k[1], (B, H), jnp.float64)
      p = jax.random.normal(k[2], (L, B, H), jnp.float64)
      bias = jnp.array([-10.0, -0.3, 0.0, 0.2, -0.05])
      weights = jax.random.normal(k[3], (L, B, H), jnp.float64)

      def reference(w, h0, p, bias):
        def body(h, p_t):
          z = h @ w + p_t
          h = jnp.sign(z) * jnp.maximum(jnp.abs(z) + bias, 0.0)
          return h, h
        return jax.lax.scan(body, h0, p)[1]

      ours_fn = self.variant(lambda *a: lnn.real_modrelu_recurrence(*a, unroll=2))
      hs = ours_fn(w, h0, p, bias)
      chex.assert_shape(hs, (L, B, H))
      chex.assert_type(hs, jnp.float64)
      np.testing.assert_allclose(hs, reference(w, h0, p, bias), rtol=1e-12, atol=1e-12)
      np.testing.assert_array_equal(hs[:, :, 0], 0.0)
      assert 0 < float(jnp.mean(hs == 0)) < 0.5  # both branches of modReLU are exercised
      ours = _assert_float64_cotangents_match(ours_fn, reference, (w, h0, p, bias), weights)
      assert float(ours[3][0]) == 0.0  # an inactive unit's bias gets no gradient

  @chex.variants(with_jit=True, without_jit=True)
  def test_bad_shapes_raise_value_error(self):
    w, h0, p, bias = jnp.eye(4), jnp.zeros((2, 4)), jnp.zeros((3, 2, 4)), jnp.zeros((4,))
    for args in ((w[:, :3], h0, p, bias), (w, h0[0], p, bias), (w, h0, p[..., :3], bias),
                 (w, h0, p, bias[:2]), (w, h0, p, jnp.zeros((1, 4)))):
      with pytest.raises(ValueError, match="expected"):
        self.variant(lnn.real_modrelu_recurrence)(*args)


def test_modrelu_pairs_is_modrelu_on_real_pairs():
  z = jax.random.normal(jax.random.key(0), (4, 3)) + 1j * jax.random.normal(
      jax.random.key(1), (4, 3))
  bias = jnp.array([-1.0, 0.0, 0.2])
  pairs = recurrence.modrelu_pairs(jnp.concatenate([jnp.real(z), jnp.imag(z)], -1), bias)
  ref = lnn.modrelu(z, bias)
  np.testing.assert_allclose(pairs, jnp.concatenate([jnp.real(ref), jnp.imag(ref)], -1),
                             atol=1e-6)


def test_elementwise_activation():
  a = jnp.array([-1.0, 0.5])
  np.testing.assert_array_equal(recurrence.elementwise_activation("relu")(a), [0.0, 0.5])
  np.testing.assert_array_equal(recurrence.elementwise_activation("identity")(a), a)
  np.testing.assert_allclose(recurrence.elementwise_activation("tanh")(a), np.tanh(a))
  with pytest.raises(ValueError, match="unknown activation"):
    recurrence.elementwise_activation("gelu")
