"""Tests of the recurrence kernels: hand-written reverse passes against autodiff.

Each kernel runs with and without jit (`chex.variants`): the custom VJPs must give the
same cotangents as autodiff of a plain `lax.scan` either way, and the shape checks
raise ValueError at trace time under jit too. The jitted variant runs the kernel and
its gradients as one program, the references run jitted, and the inputs are numpy
draws: compiling is most of the time, and run eagerly every primitive compiles on its
own. So the modReLU kernel's float64, one-step and zero-state checks run jitted only;
its eager path (the same Python) is checked against autodiff in float32.
"""

import functools
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


def _normals(seed, dtype, *shapes):
  """Standard normal draws of each shape, numpy arrays of `dtype`."""
  rng = np.random.default_rng(seed)
  return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def _states_and_cotangents(fn, args, weights):
  """fn(*args) and every cotangent of Σ sin(fn(*args)) ⊙ weights (one per argument)."""
  loss = lambda *a: jnp.sum(jnp.sin(fn(*a)) * weights)
  return fn(*args), jax.grad(loss, argnums=tuple(range(len(args))))(*args)


def _ours_and_reference(variant, kernel, reference, args, weights):
  """(states, cotangents) of the kernel under the test's variant (jitted: forward and
  reverse as one program; not: eagerly), and of the reference, jitted."""
  ours = variant(functools.partial(_states_and_cotangents, kernel))(args, weights)
  ref = jax.jit(functools.partial(_states_and_cotangents, reference))(args, weights)
  return ours, ref


def _assert_float64_cotangents_match(ours, ref):
  """Every cotangent, ours against jax.grad of the reference loop, to float64 accuracy."""
  for name, a, b in zip(("W", "h0", "p", "bias"), ours, ref):
    chex.assert_equal_shape([a, b])
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)


def _assert_relative_errors_below(ours, ref, tolerance):
  """‖a - b‖ / ‖b‖ < tolerance for each cotangent, the norms in float64."""
  for a, b in zip(ours, ref):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert np.linalg.norm(a - b) / np.linalg.norm(b) < tolerance


class ElementwiseRecurrenceTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters("relu", "tanh", "identity")
  def test_gradient_matches_autodiff(self, activation):
    L, B, H = 9, 3, 5
    dtype = jax.dtypes.canonicalize_dtype(jnp.float64)  # float32 unless x64 is on
    w, h0, p, weights = _normals(0, dtype, (H, H), (B, H), (L, B, H), (L, B, H))
    w = (w / math.sqrt(H) * 1.3).astype(dtype)
    f = {"relu": nn.relu, "tanh": jnp.tanh, "identity": lambda a: a}[activation]

    def reference(w, h0, p):
      def body(h, p_t):
        h = f(h @ w + p_t)
        return h, h
      return jax.lax.scan(body, h0, p)[1]

    kernel = lambda *b: lnn.elementwise_recurrence(*b, activation)
    (hs, ours), (ref_hs, ref) = _ours_and_reference(self.variant, kernel, reference,
                                                    (w, h0, p), weights)
    np.testing.assert_allclose(hs, ref_hs, atol=1e-5)
    _assert_relative_errors_below(ours, ref, 1e-5)
    with pytest.raises(ValueError, match="expected"):
      self.variant(kernel)(w, h0, p[:, :, :2])

  @chex.variants(with_jit=True, without_jit=True)
  @parameterized.parameters("relu", "tanh", "identity")
  def test_direct_call_matches_grad_of_plain_scan_in_float64(self, activation):
    # Unroll 2 with L odd, to float64 accuracy: f' read off the outputs h, and W̄ formed
    # as one matmul after the loop, against autodiff's step-by-step sum.
    with jax.enable_x64(True):
      L, B, H = 7, 3, 5
      w, h0, p, weights = _normals(3, np.float64, (H, H), (B, H), (L, B, H), (L, B, H))
      w = w / math.sqrt(H)
      f = {"relu": nn.relu, "tanh": jnp.tanh, "identity": lambda a: a}[activation]

      def reference(w, h0, p):
        def body(h, p_t):
          h = f(h @ w + p_t)
          return h, h
        return jax.lax.scan(body, h0, p)[1]

      kernel = lambda *a: lnn.elementwise_recurrence(*a, activation, unroll=2)
      (hs, ours), (ref_hs, ref) = _ours_and_reference(self.variant, kernel, reference,
                                                      (w, h0, p), weights)
      chex.assert_type(hs, jnp.float64)
      np.testing.assert_allclose(hs, ref_hs, rtol=1e-12, atol=1e-12)
      _assert_float64_cotangents_match(ours, ref)

  @chex.variants(with_jit=True, without_jit=True)
  def test_bad_arguments_raise_value_error(self):
    # numpy arguments: the checks raise before anything runs, so nothing compiles.
    w, h0, p = np.eye(4, dtype=np.float32), np.zeros((2, 4), np.float32), np.zeros((3, 2, 4),
                                                                                    np.float32)
    for args in ((w[:, :3], h0, p), (w, h0[0], p), (w, h0, p[0]), (w, h0[:1], p)):
      with pytest.raises(ValueError, match="expected"):
        self.variant(lnn.elementwise_recurrence)(*args)
    with pytest.raises(ValueError, match="activation"):
      self.variant(lambda *a: lnn.elementwise_recurrence(*a, "gelu"))(w, h0, p)
    with pytest.raises(ValueError, match="no steps"):
      self.variant(lnn.elementwise_recurrence)(w, h0, p[:0])


class ModReLURecurrenceTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_gradient_matches_autodiff_of_complex_modrelu(self):
    # The hand-written reverse pass of the modReLU recurrence against autodiff of the
    # same loop written with `modrelu` on complex numbers; biases straddle -|z|.
    L, B, n = 9, 3, 4
    w, h0, p, weights = _normals(0, np.float32, (2 * n, 2 * n), (B, 2 * n), (L, B, 2 * n),
                                 (L, B, 2 * n))
    w = (w / math.sqrt(2 * n) * 1.3).astype(np.float32)
    bias = np.array([-0.8, -0.1, 0.0, 0.3], np.float32)

    def reference(w, h0, p, bias):
      def body(h, p_t):
        a = h @ w + p_t
        z = lnn.modrelu(a[:, :n] + 1j * a[:, n:], bias)
        h = jnp.concatenate([jnp.real(z), jnp.imag(z)], -1)
        return h, h
      return jax.lax.scan(body, h0, p)[1]

    kernel = lambda *a: lnn.modrelu_recurrence(*a, 1)
    (hs, ours), (ref_hs, ref) = _ours_and_reference(self.variant, kernel, reference,
                                                    (w, h0, p, bias), weights)
    # float32 states grow to ~1e2 here: relative agreement (hosts round differently).
    np.testing.assert_allclose(hs, ref_hs, rtol=2e-5, atol=1e-5)
    _assert_relative_errors_below(ours, ref, 1e-4)

  @chex.variants(with_jit=True)
  def test_a_state_held_at_zero_passes_no_gradient(self):
    # h0 = 0 and 300 zero inputs (a blank image row's worth and more) keep the state at
    # exactly 0, where modReLU with b > 0 jumps: its derivative there is 0, so the
    # cotangents stay finite and those inputs get none. (The eps-smoothed derivative,
    # 1 + b/sqrt(eps) ≈ 4.2 a step, overflows float32 to inf, and inf · 0 = nan in W̄.)
    L0, L, B, n = 300, 310, 2, 3
    w, late, weights = _normals(2, np.float32, (2 * n, 2 * n), (L - L0, B, 2 * n),
                                (L, B, 2 * n))
    w = np.linalg.qr(w)[0]
    p = np.zeros((L, B, 2 * n), np.float32)
    p[L0:] = late
    h0 = np.zeros((B, 2 * n), np.float32)
    bias = np.array([0.01, 0.01, -0.01], np.float32)
    kernel = lambda *a: lnn.modrelu_recurrence(*a, 1)
    (hs, grads), (_, ref) = _ours_and_reference(self.variant, kernel, _modrelu_pairs_scan,
                                                (w, h0, p, bias), weights)
    np.testing.assert_array_equal(hs[:L0], 0.0)
    for g in grads:
      assert np.all(np.isfinite(g))
    np.testing.assert_array_equal(grads[2][:L0], 0.0)
    assert np.abs(grads[2][L0:]).max() > 0
    for a, b in zip(grads, ref):
      np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
    # The complex `modrelu` and `modrelu_pairs` take the same value at 0: no gradient.
    def complex_modrelu(a):
      z = lnn.modrelu(a[:n] + 1j * a[n:], bias)
      return jnp.concatenate([jnp.real(z), jnp.imag(z)])

    jacobians = jax.jit(lambda a: (jax.jacobian(complex_modrelu)(a), jax.jacobian(
        lambda a: recurrence.modrelu_pairs(a, bias))(a)))(np.zeros(2 * n, np.float32))
    np.testing.assert_array_equal(jacobians[0], 0.0)
    np.testing.assert_array_equal(jacobians[1], 0.0)

  @chex.variants(with_jit=True)
  def test_one_step_matches_autodiff_of_modrelu_pairs(self):
    # L = 1: the cotangents formed after the reverse loop (W̄, h̄_0, p̄, and b̄ with each
    # unit's z·v read off δ) against autodiff of `modrelu_pairs` itself.
    with jax.enable_x64(True):
      B, n = 6, 3
      w, h0, p, weights = _normals(4, np.float64, (2 * n, 2 * n), (B, 2 * n), (1, B, 2 * n),
                                   (1, B, 2 * n))
      bias = np.array([-0.3, 0.2, -50.0])  # the last unit inactive everywhere

      def reference(w, h0, p, bias):
        return recurrence.modrelu_pairs(h0 @ w + p[0], bias)[None]

      (hs, ours), (ref_hs, ref) = _ours_and_reference(
          self.variant, lnn.modrelu_recurrence, reference, (w, h0, p, bias), weights)
      np.testing.assert_allclose(hs, ref_hs, rtol=1e-12, atol=1e-12)
      _assert_float64_cotangents_match(ours, ref)
      assert float(ours[3][2]) == 0.0  # an inactive unit's bias gets no gradient

  @chex.variants(with_jit=True)
  def test_direct_call_matches_grad_of_plain_scan_in_float64(self):
    # `modrelu_recurrence` called directly (unroll 2, L odd) against jax.grad through a
    # plain lax.scan written here on real pairs: all four cotangents, to float64 accuracy.
    with jax.enable_x64(True):
      L, B, n = 7, 2, 3
      w, h0, p, weights = _normals(1, np.float64, (2 * n, 2 * n), (B, 2 * n), (L, B, 2 * n),
                                   (L, B, 2 * n))
      w = w / math.sqrt(2 * n)
      bias = np.array([-10.0, -0.2, 0.1])  # the first unit is always off

      kernel = lambda *a: lnn.modrelu_recurrence(*a, unroll=2)
      (hs, ours), (ref_hs, ref) = _ours_and_reference(
          self.variant, kernel, _modrelu_pairs_scan, (w, h0, p, bias), weights)
      chex.assert_shape(hs, (L, B, 2 * n))
      chex.assert_type(hs, jnp.float64)
      np.testing.assert_allclose(hs, ref_hs, rtol=1e-12, atol=1e-12)
      np.testing.assert_array_equal(hs[:, :, 0], 0.0)
      _assert_float64_cotangents_match(ours, ref)
      assert float(ours[3][0]) == 0.0  # an inactive unit's bias gets no gradient

  @chex.variants(with_jit=True)
  @parameterized.parameters(False, True)
  def test_gauss_product_matches_grad_of_plain_scan_in_float64(self, last_only):
    # product="gauss" (three n×n products from W's complex blocks) against jax.grad
    # through the plain scan with h @ W: states and all four cotangents.
    with jax.enable_x64(True):
      L, B, n = 6, 2, 3
      re, im, h0, p, weights = _normals(5, np.float64, (n, n), (n, n), (B, 2 * n),
                                        (L, B, 2 * n), (L, B, 2 * n))
      w = np.block([[re, im], [-im, re]]) / math.sqrt(2 * n)
      bias = np.array([-0.4, 0.05, 0.2])
      last = (lambda hs: hs[-1]) if last_only else (lambda hs: hs)
      kernel = lambda *a: lnn.modrelu_recurrence(*a, last_only=last_only, product="gauss")
      (hs, ours), (ref_hs, ref) = _ours_and_reference(
          self.variant, kernel, lambda *a: last(_modrelu_pairs_scan(*a)), (w, h0, p, bias),
          last(weights))
      np.testing.assert_allclose(hs, ref_hs, rtol=1e-12, atol=1e-12)
      _assert_float64_cotangents_match(ours, ref)

  def test_gauss_product_rounds_about_as_well_as_the_real_one_in_float32(self):
    # Gauss's imaginary part, (x + y)(P + Q) - xP - yQ, cancels: its float32 cotangents
    # after 300 steps stay within 3x the real product's distance from float64.
    L, B, n = 300, 4, 64
    rng = np.random.default_rng(7)
    u = np.linalg.qr(rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n)))[0]
    w = np.block([[u.real.T, u.imag.T], [-u.imag.T, u.real.T]])
    h0, p = rng.uniform(-0.1, 0.1, (B, 2 * n)), 0.1 * rng.standard_normal((L, B, 2 * n))
    bias, ct = rng.uniform(-0.01, 0.01, n), rng.standard_normal((B, 2 * n))

    def cotangents(dtype, product):
      loss = lambda *a: jnp.sum(lnn.modrelu_recurrence(*a, last_only=True, product=product)
                                * ct.astype(dtype))
      args = [np.asarray(a, dtype) for a in (w, h0, p, bias)]
      return jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))(*args)

    with jax.enable_x64(True):
      ref = [np.asarray(g) for g in cotangents(np.float64, "real")]  # numpy: float64 kept
    error = lambda g: [np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b)
                       for a, b in zip(g, ref)]
    real, gauss = error(cotangents(np.float32, "real")), error(cotangents(np.float32, "gauss"))
    assert max(gauss) < 1e-4
    for r, g in zip(real, gauss):
      assert g < 3 * r, (real, gauss)

  def test_choose_complex_product(self):
    assert recurrence.choose_complex_product(250, "cpu") == "gauss"
    assert recurrence.choose_complex_product(np.int64(249), "cpu") == "real"
    assert recurrence.choose_complex_product(512, "gpu") == "real"
    with pytest.raises(ValueError, match="positive integer"):
      recurrence.choose_complex_product(0)

  @chex.variants(with_jit=True, without_jit=True)
  def test_bad_shapes_raise_value_error(self):
    n = 3
    # numpy arguments: the checks raise before anything runs, so nothing compiles.
    z = lambda *shape: np.zeros(shape, np.float32)
    w, h0, p, bias = np.eye(2 * n, dtype=np.float32), z(2, 2 * n), z(4, 2, 2 * n), z(n)
    for args in ((w[:, :5], h0, p, bias), (w, h0[0], p, bias), (w, h0, p[..., :5], bias),
                 (w, h0, p, bias[:2]), (w, h0, p, z(1, n)),
                 (np.eye(5, dtype=np.float32), z(2, 5), z(4, 2, 5), bias)):
      with pytest.raises(ValueError, match="expected"):
        self.variant(lnn.modrelu_recurrence)(*args)
    with pytest.raises(ValueError, match="no steps"):
      self.variant(lnn.modrelu_recurrence)(w, h0, p[:0], bias)
    with pytest.raises(ValueError, match="product"):
      self.variant(lambda *a: lnn.modrelu_recurrence(*a, product="complex"))(w, h0, p, bias)


class RealModReLURecurrenceTest(chex.TestCase):

  @chex.variants(with_jit=True, without_jit=True)
  def test_matches_grad_of_plain_scan_in_float64(self):
    # Against jax.grad through a plain lax.scan of sign(z)·relu(|z| + b) written here:
    # all four cotangents, unroll 2 with L odd, one unit always off, biases of both signs.
    with jax.enable_x64(True):
      L, B, H = 7, 3, 5
      w, h0, p, weights = _normals(2, np.float64, (H, H), (B, H), (L, B, H), (L, B, H))
      w = w / math.sqrt(H)
      bias = np.array([-10.0, -0.3, 0.0, 0.2, -0.05])

      def reference(w, h0, p, bias):
        def body(h, p_t):
          z = h @ w + p_t
          h = jnp.sign(z) * jnp.maximum(jnp.abs(z) + bias, 0.0)
          return h, h
        return jax.lax.scan(body, h0, p)[1]

      kernel = lambda *a: lnn.real_modrelu_recurrence(*a, unroll=2)
      (hs, ours), (ref_hs, ref) = _ours_and_reference(self.variant, kernel, reference,
                                                      (w, h0, p, bias), weights)
      chex.assert_shape(hs, (L, B, H))
      chex.assert_type(hs, jnp.float64)
      np.testing.assert_allclose(hs, ref_hs, rtol=1e-12, atol=1e-12)
      np.testing.assert_array_equal(hs[:, :, 0], 0.0)
      assert 0 < np.mean(np.asarray(hs) == 0) < 0.5  # both branches of modReLU are exercised
      _assert_float64_cotangents_match(ours, ref)
      assert float(ours[3][0]) == 0.0  # an inactive unit's bias gets no gradient

  @chex.variants(with_jit=True, without_jit=True)
  def test_bad_shapes_raise_value_error(self):
    # numpy arguments: the checks raise before anything runs, so nothing compiles.
    z = lambda *shape: np.zeros(shape, np.float32)
    w, h0, p, bias = np.eye(4, dtype=np.float32), z(2, 4), z(3, 2, 4), z(4)
    for args in ((w[:, :3], h0, p, bias), (w, h0[0], p, bias), (w, h0, p[..., :3], bias),
                 (w, h0, p, bias[:2]), (w, h0, p, z(1, 4))):
      with pytest.raises(ValueError, match="expected"):
        self.variant(lnn.real_modrelu_recurrence)(*args)
    with pytest.raises(ValueError, match="no steps"):
      self.variant(lnn.real_modrelu_recurrence)(w, h0, p[:0], bias)


def test_modrelu_pairs_is_modrelu_on_real_pairs():
  x, y = _normals(0, np.float32, (4, 3), (4, 3))
  bias = np.array([-1.0, 0.0, 0.2], np.float32)
  pairs, ref = jax.jit(lambda x, y: (recurrence.modrelu_pairs(jnp.concatenate([x, y], -1), bias),
                                     lnn.modrelu(jax.lax.complex(x, y), bias)))(x, y)
  ref = np.asarray(ref)
  np.testing.assert_allclose(pairs, np.concatenate([ref.real, ref.imag], -1), atol=1e-6)
  for bad in (bias[:2], bias.astype(np.complex64), bias[None]):  # mul's TypeError or a broadcast
    with pytest.raises(ValueError, match=r"bias must be real \(n,\)"):
      recurrence.modrelu_pairs(np.zeros((4, 6), np.float32), bad)


def test_elementwise_activation():
  a = np.array([-1.0, 0.5], np.float32)
  np.testing.assert_array_equal(recurrence.elementwise_activation("relu")(a), [0.0, 0.5])
  np.testing.assert_array_equal(recurrence.elementwise_activation("identity")(a), a)
  np.testing.assert_allclose(recurrence.elementwise_activation("tanh")(a), np.tanh(a))
  with pytest.raises(ValueError, match="unknown activation"):
    recurrence.elementwise_activation("gelu")


def _plain_scan(step):
  """All states of h_t = step(h_{t-1} @ w + p_t) by `lax.scan`, for autodiff to differentiate."""
  def states(w, h0, p):
    return jax.lax.scan(lambda h, p_t: (step(h @ w + p_t),) * 2, h0, p)[1]
  return states


@pytest.mark.parametrize("kernel", ["relu", "modrelu", "real_modrelu"])
@pytest.mark.parametrize("L", [1, 7])
def test_last_only_is_the_last_state_and_its_cotangents_in_float64(kernel, L):
  # The last-step readout's path (no states kept when evaluated, the last cotangent
  # carried in when differentiated) against autodiff of a plain scan's last state; unroll
  # 2 with L odd, and L = 1.
  with jax.enable_x64(True):
    B, H = 3, 6
    w, h0, p, weights = _normals(4, np.float64, (H, H), (B, H), (L, B, H), (B, H))
    w, h0 = w / math.sqrt(H), 0.3 * h0
    bias = np.array([0.2, -0.3, 0.1, 0.05, -0.1, 0.3])
    if kernel == "relu":
      ours = lambda w, h0, p: lnn.elementwise_recurrence(w, h0, p, "relu", 2, last_only=True)
      reference = _plain_scan(nn.relu)
    elif kernel == "modrelu":
      ours = lambda w, h0, p: lnn.modrelu_recurrence(w, h0, p, bias[:3], 2, last_only=True)
      reference = lambda w, h0, p: _modrelu_pairs_scan(w, h0, p, bias[:3])
    else:
      ours = lambda w, h0, p: lnn.real_modrelu_recurrence(w, h0, p, bias, 2, last_only=True)
      reference = _plain_scan(lambda a: lnn.real_modrelu(a, bias))
    (h_last, ours_ct), (ref_hs, ref_ct) = jax.jit(lambda *a: (
        _states_and_cotangents(ours, a, weights),
        _states_and_cotangents(lambda *b: reference(*b)[-1], a, weights)))(w, h0, p)
    chex.assert_shape(h_last, (B, H))
    np.testing.assert_allclose(h_last, ref_hs, rtol=1e-12, atol=1e-12)
    _assert_float64_cotangents_match(ours_ct, ref_ct)
    # Evaluated alone (no reverse pass): the same state.
    np.testing.assert_allclose(jax.jit(ours)(w, h0, p), ref_hs, rtol=1e-12, atol=1e-12)


def test_input_projection_is_dense_with_one_feature_or_many():
  # Its parameters and numbers are nn.Dense's; one input feature takes the scaling path.
  for d in (1, 3):
    x = _normals(5, np.float32, (4, 2, d))[0]
    ours, dense = lnn.InputProjection(5), nn.Dense(5)
    params = jax.jit(dense.init)(jax.random.key(0), x)
    assert jax.tree.map(jnp.shape, jax.eval_shape(ours.init, jax.random.key(0), x)) == (
        jax.tree.map(jnp.shape, params))
    # Values and gradients of both, one compiled program.
    both = jax.jit(lambda q: [(m.apply(q, x), jax.grad(lambda q: jnp.sum(jnp.sin(
        m.apply(q, x))))(q)) for m in (ours, dense)])
    (y_ours, g_ours), (y_dense, g_dense) = both(params)
    np.testing.assert_allclose(y_ours, y_dense, rtol=1e-6)
    chex.assert_trees_all_close(g_ours, g_dense, rtol=1e-5)


@pytest.mark.parametrize("kernel", ["tanh", "modrelu", "real_modrelu"])
@pytest.mark.parametrize("D,last_only", [(1, True), (3, False)])
def test_a_projection_formed_in_the_loop_matches_the_projected_inputs(kernel, D, last_only):
  # A Projection (x, V, b) against autodiff of a plain scan over x @ V + b: the states and
  # the cotangents of W, h0, x, V and b, in float64.
  with jax.enable_x64(True):
    L, B, H = 5, 3, 6
    w, h0, x, v, b = _normals(6, np.float64, (H, H), (B, H), (L, B, D), (D, H), (H,))
    w = w / math.sqrt(H)
    weights = _normals(7, np.float64, (B, H) if last_only else (L, B, H))[0]
    bias = np.array([0.2, -0.3, 0.1, 0.05, -0.1, 0.3])
    ours_fn = {"tanh": lambda *a: lnn.elementwise_recurrence(*a, "tanh", last_only=last_only),
               "modrelu": lambda *a: lnn.modrelu_recurrence(*a, bias[:3], last_only=last_only),
               "real_modrelu": lambda *a: lnn.real_modrelu_recurrence(*a, bias,
                                                                      last_only=last_only)}
    reference = {"tanh": _plain_scan(jnp.tanh),
                 "modrelu": lambda w, h0, p: _modrelu_pairs_scan(w, h0, p, bias[:3]),
                 "real_modrelu": _plain_scan(lambda a: lnn.real_modrelu(a, bias))}[kernel]
    ours = lambda w, h0, x, v, b: ours_fn[kernel](w, h0, recurrence.Projection(x, v, b))
    ref = lambda w, h0, x, v, b: (lambda hs: hs[-1] if last_only else hs)(
        reference(w, h0, x @ v + b))
    (hs, ours_ct), (ref_hs, ref_ct) = jax.jit(lambda *a: (
        _states_and_cotangents(ours, a, weights),
        _states_and_cotangents(ref, a, weights)))(w, h0, x, v, b)
    np.testing.assert_allclose(hs, ref_hs, rtol=1e-12, atol=1e-12)
    for name, a, c in zip(("W", "h0", "x", "V", "b"), ours_ct, ref_ct):
      np.testing.assert_allclose(a, c, rtol=1e-10, atol=1e-12, err_msg=name)
    np.testing.assert_allclose(jax.jit(ours)(w, h0, x, v, b), ref_hs, rtol=1e-12, atol=1e-12)


def test_a_projection_of_the_wrong_shape_raises():
  z = lambda *shape: np.zeros(shape, np.float32)
  w, h0 = np.eye(4, dtype=np.float32), z(2, 4)
  for projection in (recurrence.Projection(z(3, 2, 1), z(1, 5)),
                     recurrence.Projection(z(3, 2, 1), z(1, 4), z(5)),
                     recurrence.Projection(z(2, 1), z(1, 4))):
    with pytest.raises(ValueError, match="expected"):
      lnn.elementwise_recurrence(w, h0, projection)
  with pytest.raises(ValueError, match="expected"):  # its batch is not h0's
    lnn.modrelu_recurrence(w, h0, recurrence.Projection(z(3, 5, 1), z(1, 4)), z(2))


def test_parameters_of_another_dtype_than_h0_raise_and_narrower_data_runs(x64):
  # A wider input failed in the loop's type check (scan's carry changed dtype); a wider
  # h0 ran and gave a float32 W a float64 gradient.
  z = lambda *shape, d=np.float64: np.zeros(shape, d)  # noqa: E731
  w, h0, p = np.eye(4), z(2, 4), z(3, 2, 4)
  f32 = lambda a: a.astype(np.float32)  # noqa: E731
  for name, args in (("projected float64", (f32(w), f32(h0), p)),
                     ("transition float32", (f32(w), h0, p)),
                     ("transition float64", (w, f32(h0), f32(p))),
                     ("kernel float32", (w, h0, recurrence.Projection(z(3, 2, 1), f32(z(1, 4))))),
                     ("x float64", (f32(w), f32(h0),
                                    recurrence.Projection(z(3, 2, 1), f32(z(1, 4)))))):
    with pytest.raises(ValueError, match=f"h0's dtype.*{name}"):
      lnn.elementwise_recurrence(*args)
  with pytest.raises(ValueError, match="bias_n float64"):
    lnn.modrelu_recurrence(f32(w), f32(h0), f32(p), z(2))
  with pytest.raises(ValueError, match="bias_H float32"):
    lnn.real_modrelu_recurrence(w, h0, p, z(4, d=np.float32))
  # Data narrower than h0 (float32 images into a float64 model) runs in h0's dtype.
  x, kernel = f32(np.ones((3, 2, 1))), np.full((1, 4), 0.5)
  hs = lnn.elementwise_recurrence(w, h0, recurrence.Projection(x, kernel), activation="identity")
  assert hs.dtype == np.float64
  np.testing.assert_allclose(hs[-1], np.full((2, 4), 1.5))  # h_t = h_{t-1} + 0.5


def test_inputs_that_are_not_real_floats_raise():
  # Complex inputs failed in the loop's type check; integers ran and returned integers.
  z = lambda *shape, d=np.float32: np.zeros(shape, d)  # noqa: E731
  w, h0, p = np.eye(4, dtype=np.float32), z(2, 4), z(3, 2, 4)
  for name, args in (("transition", (w.astype(np.complex64), h0, p)),
                     ("transition", (w.astype(np.int32), h0, p)),
                     ("h0", (w, h0.astype(np.int32), p)),
                     ("projected", (w, h0, p.astype(np.float16))),
                     ("kernel", (w, h0, recurrence.Projection(z(3, 2, 1), z(1, 4, d=np.int32))))):
    with pytest.raises(ValueError, match=name):
      lnn.elementwise_recurrence(*args)
  with pytest.raises(ValueError, match="bias_n must be real"):
    lnn.modrelu_recurrence(w, h0, p, z(2, d=np.complex64))
  with pytest.raises(ValueError, match="bias_H must be real"):
    lnn.real_modrelu_recurrence(w, h0, p, z(4, d=np.complex64))
  # The activations: z of the documented kind, a bias (n,) neither complex nor broadcast.
  for f, z_ok, z_bad in ((lnn.modrelu, z(2, 3, d=np.complex64), z(2, 3)),
                         (lnn.real_modrelu, z(2, 3), z(2, 3, d=np.complex64))):
    with pytest.raises(ValueError, match="takes"):
      f(z_bad, z(3))
    for bias in (z(2), z(3, d=np.complex64), z(1, 3)):
      with pytest.raises(ValueError, match=r"bias must be real \(3,\)"):
        f(z_ok, bias)
