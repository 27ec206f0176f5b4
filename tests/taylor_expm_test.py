"""The "taylor" exponential and the rebased square layers, against independent references.

References: scipy's expm in float64 (`jax.scipy.linalg.expm` under float64), the Taylor
series summed in numpy, and central finite differences. Every degree branch is reached by the
norm of its input (thresholds in `lie_unitary.expm`).
"""

import math

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import lie_unitary as lu
from lie_unitary import expm
from lie_unitary import nnx as lnnx
from lie_unitary.nn import nnx_linear

# ‖A‖₁ scales reaching each branch in float32 (θ = 6e-8, 3.5e-4, 0.035, 0.19, 0.47,
# 1.31, 2.97) and the Padé fallback beyond.
_SCALES = (0.0, 1e-4, 0.01, 0.1, 0.3, 1.0, 2.0, 8.0)


def _skew(n, norm, seed=0, complex_=False):
  rng = np.random.default_rng(seed)
  a = rng.normal(size=(n, n)) + (1j * rng.normal(size=(n, n)) if complex_ else 0)
  a = (a - np.conj(a.T)) / 2
  return a * (norm / max(np.abs(a).sum(0).max(), 1e-300))


def test_thresholds_bound_the_remainders_of_value_and_derivative():
  for dtype in ("float32", "float64"):
    u = np.finfo(dtype).eps / 2
    for m, theta in zip(expm._TAYLOR_DEGREES, expm._taylor_thresholds(dtype)):
      # The derivative drops Σ_{j≥m} (its bound); the value Σ_{j>m}, smaller.
      remainder = sum(theta**j / math.factorial(j) for j in range(m, m + 60))
      assert remainder <= u and remainder > u / 2, (dtype, m)


@pytest.mark.parametrize("m", [1, 2, 4, 6, 8, 12, 18])
def test_polynomial_is_the_truncated_series(m):
  a = np.random.default_rng(m).normal(size=(2, 5, 5)) * 0.4
  want = sum(np.linalg.matrix_power(a, j) / math.factorial(j) for j in range(m + 1))
  np.testing.assert_allclose(expm._taylor_polynomial(jnp.asarray(a, jnp.float32), m), want,
                             atol=2e-6)


@pytest.mark.parametrize("complex_", [False, True])
def test_values_at_every_branch_against_float64_expm(complex_):
  n = 6
  fn = jax.jit(lambda a: expm.expm_skew_hermitian(a, method="taylor") if complex_
               else expm.expm_skew_symmetric(a, method="taylor"))
  for scale in _SCALES:
    a = _skew(n, scale, complex_=complex_)
    want = scipy.linalg.expm(a)
    got = fn(jnp.asarray(a, jnp.complex64 if complex_ else jnp.float32))
    np.testing.assert_allclose(got, want, atol=1e-6 * max(1.0, scale), err_msg=str(scale))


def test_float64_values_to_double_rounding(x64):
  for scale in _SCALES:
    a = jnp.asarray(_skew(5, scale))
    np.testing.assert_allclose(expm.expm_skew_symmetric(a, method="taylor"),
                               jax.scipy.linalg.expm(a), atol=5e-15)


def test_derivatives_both_modes_at_every_branch(x64):
  """float64 (the branches' float64 thresholds); μ ↦ R(μ) against finite differences."""
  n = 4
  f = jax.jit(lambda mu: expm.orthogonal_from_lambdas(mu, method="taylor"))
  jvp = jax.jit(lambda mu, v: jax.jvp(f, (mu,), (v,))[1])
  vjp = jax.jit(lambda mu, g: jax.vjp(f, mu)[1](g)[0])
  rng = np.random.default_rng(3)
  for scale in (0.0, 1e-9, 1e-4, 0.01, 0.2, 0.8, 3.0):
    mu = rng.normal(size=n * (n - 1) // 2)
    mu = mu * scale / np.abs(mu).sum()
    v = rng.normal(size=mu.shape)
    g = rng.normal(size=(n, n))
    step = 1e-6
    fd = (np.asarray(f(mu + step * v)) - np.asarray(f(mu - step * v))) / (2 * step)
    np.testing.assert_allclose(jvp(mu, v), fd, atol=1e-8, err_msg=str(scale))
    # ⟨g, J v⟩ = ⟨Jᵀ g, v⟩
    np.testing.assert_allclose(np.vdot(vjp(mu, g), v), np.vdot(g, fd), rtol=1e-7, atol=1e-9)


def test_float32_derivatives_at_every_branch_against_float64_expm(x64):
  """The float32 jvp against JAX's derivative of `jax.scipy.linalg.expm` in float64:
  exact to float32 rounding at every branch (the thresholds bound the derivative's
  truncation too)."""
  n = 6
  rng = np.random.default_rng(4)
  f32 = jax.jit(lambda a, e: jax.jvp(lambda m: expm.expm_skew_symmetric(m, method="taylor"),
                                     (a,), (e,))[1])
  ref = jax.jit(lambda a, e: jax.jvp(jax.scipy.linalg.expm, (a,), (e,))[1])
  for scale in _SCALES:
    a = _skew(n, scale)
    e = rng.normal(size=(n, n))
    e = (e - e.T) / 2
    got = f32(jnp.asarray(a, jnp.float32), jnp.asarray(e, jnp.float32))
    want = ref(jnp.asarray(a), jnp.asarray(e))
    np.testing.assert_allclose(got, want, atol=2e-6 * np.abs(want).max(), err_msg=str(scale))


def test_a_batch_takes_the_branch_of_its_largest_norm():
  a = np.stack([_skew(4, 1e-5), _skew(4, 2.0, seed=1)]).astype(np.float32)
  got = expm.expm_skew_symmetric(a, method="taylor")
  np.testing.assert_allclose(got, np.stack([scipy.linalg.expm(m) for m in a.astype(float)]),
                             atol=1e-6)


def _loss(w, x):  # not Σy², which no orthogonal W changes
  return jnp.sum(jnp.sin(x @ jnp.real(w).T)[:, 0])


@pytest.mark.parametrize("kind", ["orthogonal", "unitary"])
def test_linen_rebased_layer_same_w_at_init_then_rebase(kind):
  n = 4
  x = np.random.default_rng(0).normal(size=(3, n)).astype(np.float32)
  make = (lambda **kw: lu.OrthogonalLinear(n, **kw)) if kind == "orthogonal" else (
      lambda **kw: lu.UnitaryLinear(n, **kw))
  rebased = make(rebased=True)
  xin = x if kind == "orthogonal" else x.astype(np.complex64)
  vr = jax.jit(rebased.init)(jax.random.key(0), xin)
  name = "mu" if kind == "orthogonal" else "lam"
  np.testing.assert_array_equal(vr["params"][name], 0)
  # W at init: the base is the plain layer's map at an initial draw of λ₀ ~ N(0, 1).
  w0 = np.asarray(vr[lu.nn.BASE_COLLECTION]["base"])
  np.testing.assert_allclose(np.conj(w0).T @ w0, np.eye(n), atol=2e-6)
  # W₀ · expm(A(μ)) against the float64 reference, at a point away from 0.
  coeffs = np.random.default_rng(1).normal(size=vr["params"][name].shape) * 0.3
  vr = {**vr, "params": {name: jnp.asarray(coeffs, jnp.float32)}}
  skew = (lu.lambdas_to_skew_symmetric if kind == "orthogonal" else
          lu.lambdas_to_skew_hermitian)(np.asarray(coeffs, np.float32))
  want = np.asarray(w0, np.complex128) @ scipy.linalg.expm(np.asarray(skew, np.complex128))
  matrix = jax.jit(lambda v: rebased.apply(v, n, method="matrix"))
  np.testing.assert_allclose(matrix(vr), want, atol=3e-6)
  # Gradients reach the coefficients only, and match finite differences.
  loss = jax.jit(lambda p: _loss(matrix({**vr, "params": p}), x))
  g = jax.jit(jax.grad(loss))(vr["params"])[name]
  v = np.random.default_rng(2).normal(size=coeffs.shape)
  step = 1e-2
  fd = (loss({name: coeffs + step * v}) - loss({name: coeffs - step * v})) / (2 * step)
  np.testing.assert_allclose(np.vdot(g, v), fd, rtol=2e-3, atol=2e-4)
  # rebase: the same W, coefficients 0, an orthonormal base.
  moved = lu.nn.rebase(vr)
  np.testing.assert_array_equal(moved["params"][name], 0)
  np.testing.assert_allclose(matrix(moved), want, atol=3e-6)


def test_rebased_layers_refuse_non_square_and_rebase_needs_a_base():
  x = np.ones((2, 5), np.float32)
  with pytest.raises(ValueError, match="square layers"):
    lu.OrthogonalLinear(3, rebased=True).init(jax.random.key(0), x)
  with pytest.raises(ValueError, match="square layers"):
    lnnx.OrthogonalLinear(5, 3, rebased=True, rngs=nnx.Rngs(0))
  v = jax.eval_shape(lu.OrthogonalLinear(3).init, jax.random.key(0), x)
  with pytest.raises(ValueError, match="lie_base"):
    lu.nn.rebase(v)
  # A base of the other kind beside the coefficients (complex with mu, real with lam).
  for coeffs, base in (("mu", np.eye(3, dtype=np.complex64)), ("lam", np.eye(3, dtype=np.float32))):
    with pytest.raises(ValueError, match=f"beside '{coeffs}'"):
      lu.nn.rebase({"params": {coeffs: np.zeros(3 if coeffs == "mu" else 9, np.float32)},
                    lu.nn.BASE_COLLECTION: {"base": base}})
  with pytest.raises(ValueError, match=r"makes a 4×4 rotation beside a base of shape \(3, 3\)"):
    lu.nn.rebase({"params": {"mu": np.zeros(6, np.float32)},
                  lu.nn.BASE_COLLECTION: {"base": np.eye(3, dtype=np.float32)}})
  base = lu.nn.BASE_COLLECTION
  for variables, match in (  # each a ValueError naming the problem, not a KeyError or TypeError
      ({"params": {"mu": np.zeros(3)}, base: {"base": np.ones((2, 3))}},
       r"makes a 3×3 rotation beside a base of shape \(2, 3\)"),
      ({"params": {}, base: {"layer": {"base": np.eye(2)}}}, "layer holds bases but no module"),
      ({"params": None, base: {"base": np.eye(2)}}, r"variables\['params'\] must be a dict")):
    with pytest.raises(ValueError, match=match):
      lu.nn.rebase(variables)
  with pytest.raises(ValueError, match="rebased=True"):
    nnx.eval_shape(lambda: lnnx.OrthogonalLinear(5, 5, rngs=nnx.Rngs(0))).rebase()


def test_nnx_rebased_layer_same_w_trains_only_mu_and_rebases():
  n = 5
  x = np.random.default_rng(0).normal(size=(3, n)).astype(np.float32)
  plain = lnnx.OrthogonalLinear(n, n, rngs=nnx.Rngs(0))
  layer = lnnx.OrthogonalLinear(n, n, rngs=nnx.Rngs(0), rebased=True)
  np.testing.assert_allclose(layer.matrix(), plain.matrix(), atol=1e-6)  # same draw, same W
  grads = nnx.grad(lambda m: _loss(m.matrix(), x))(layer)
  # flax 0.10 returns a State, later versions a module of the same shape.
  grads = grads if isinstance(grads, nnx.State) else nnx.state(grads)
  assert set(grads.keys()) == {"mu"}
  layer.mu = nnx.Param(jnp.full(layer.mu[...].shape, 0.05, jnp.float32))
  want = np.asarray(plain.matrix(), np.float64) @ scipy.linalg.expm(
      np.asarray(lu.lambdas_to_skew_symmetric(layer.mu[...]), np.float64))
  np.testing.assert_allclose(layer.matrix(), want, atol=2e-6)
  layer.rebase()
  np.testing.assert_array_equal(layer.mu[...], 0)
  assert isinstance(layer.base, nnx_linear.Base)
  np.testing.assert_allclose(layer.matrix(), want, atol=2e-6)
