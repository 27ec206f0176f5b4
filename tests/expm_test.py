"""The spectral derivative rule in reverse mode against Padé autodiff, finite differences
and check_grads (forward mode, second order and the backends: expm_modes_test.py)."""

import jax
import jax.numpy as jnp
from jax.test_util import check_grads
import numpy as np
import pytest

import lie_unitary as lu
from lie_unitary import paper_rule

# fast_compiles: compile-bound (measured cold, 2 cores: about 25-35% less time).
pytestmark = pytest.mark.usefixtures("strict_rank_promotion", "fast_compiles")

N = 5


def _data(n, dtype=jnp.complex128):
  k1, k2, k3, k4 = jax.random.split(jax.random.key(7), 4)
  x = jax.lax.complex(jax.random.normal(k1, (n, 3)), jax.random.normal(k2, (n, 3)))
  y = jax.lax.complex(jax.random.normal(k3, (n, 3)), jax.random.normal(k4, (n, 3)))
  return x.astype(dtype), y.astype(dtype)


def _loss(to_unitary, lam, x, y):
  """A real loss that depends on both real and imaginary parts of every entry of U."""
  u = to_unitary(lam)
  return jnp.sum(jnp.abs(u @ x - y) ** 2) + jnp.sum(jnp.real(u) * jnp.imag(u))


def _padé_unitary(lam):
  return jax.scipy.linalg.expm(lu.lambdas_to_skew_hermitian(lam))


def _repeated_eigenvalue_lambdas(n):
  """λ of W diag(i·[1, 1, 1, -2, -2]) Wᴴ for a random unitary W."""
  w = lu.random_unitary(jax.random.key(3), n, "haar", jnp.complex128)
  phases = jnp.array([1.0, 1.0, 1.0, -2.0, -2.0][:n])
  skew = (w * (1j * phases)[None, :]) @ jnp.conj(w.T)
  return lu.skew_hermitian_to_lambdas(skew)


def _points(n):
  lam = jax.random.normal(jax.random.key(0), (n * n,), jnp.float64)
  return {
      "random": lam,
      "zero": jnp.zeros(n * n, jnp.float64),
      "repeated": _repeated_eigenvalue_lambdas(n),
      "large": 100.0 * lam / jnp.linalg.norm(lam),
  }


def _rel(a, b):
  return float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b))


@pytest.mark.parametrize("point", ["random", "zero", "repeated", "large"])
def test_gradient_matches_pade_autodiff(x64, point):
  lam = _points(N)[point]
  x, y = _data(N)
  ours = jax.grad(lambda l: _loss(lu.unitary_from_lambdas, l, x, y))(lam)
  ref = jax.grad(lambda l: _loss(_padé_unitary, l, x, y))(lam)
  assert np.all(np.isfinite(ours))
  assert _rel(ours, ref) <= 1e-8


@pytest.mark.parametrize("point", ["random", "zero", "repeated", "large"])
def test_gradient_matches_central_finite_differences(x64, point):
  lam = _points(N)[point]
  x, y = _data(N)
  loss = jax.jit(lambda l: _loss(lu.unitary_from_lambdas, l, x, y))
  step = 1e-5
  eye = jnp.eye(N * N, dtype=jnp.float64)
  fd = jax.vmap(lambda e: (loss(lam + step * e) - loss(lam - step * e)) / (2 * step))(eye)
  ours = jax.grad(loss)(lam)
  assert _rel(ours, fd) <= 1e-6


def test_forward_matches_pade(x64):
  for point, lam in _points(N).items():
    np.testing.assert_allclose(lu.unitary_from_lambdas(lam), _padé_unitary(lam),
                               atol=1e-11, err_msg=point)


def test_paper_per_parameter_rule_agrees(x64):
  lam = _points(N)["random"]
  x, y = _data(N)
  u, vjp = jax.vjp(lu.unitary_from_lambdas, lam)
  g_u = jax.grad(lambda u: jnp.sum(jnp.abs(u @ x - y) ** 2))(u)
  assert _rel(paper_rule.paper_gradient(lam, g_u), vjp(g_u)[0]) <= 1e-10
  jac = jnp.moveaxis(jax.jacfwd(_padé_unitary)(lam), -1, 0)
  np.testing.assert_allclose(paper_rule.paper_jacobian(lam), jac, atol=1e-11)


def test_check_grads_at_general_complex_matrix(x64):
  k1, k2 = jax.random.split(jax.random.key(11))
  general = jax.lax.complex(jax.random.normal(k1, (4, 4)), jax.random.normal(k2, (4, 4)))
  check_grads(lu.expm_skew_hermitian, (general,), order=1, modes=["rev"])
  # Only the skew-Hermitian part is used, and the gradient knows it.
  skew = 0.5 * (general - jnp.conj(general.T))
  np.testing.assert_allclose(lu.expm_skew_hermitian(general), jax.scipy.linalg.expm(skew),
                             atol=1e-12)
  x, y = _data(4)
  f = lambda m: jnp.sum(jnp.abs(lu.expm_skew_hermitian(m) @ x - y) ** 2)
  ref = lambda m: jnp.sum(jnp.abs(jax.scipy.linalg.expm(0.5 * (m - jnp.conj(m.T))) @ x - y) ** 2)
  assert _rel(jax.grad(f)(general), jax.grad(ref)(general)) <= 1e-10


def test_check_grads_through_lambdas(x64):
  for point in ("random", "repeated"):
    check_grads(lu.unitary_from_lambdas, (_points(4)[point],), order=1, modes=["rev"])


@pytest.mark.parametrize("point", ["zero", "near_degenerate", "random"])
def test_complex64_is_unitary_and_finite(point):
  n = 8
  lam = {
      "zero": jnp.zeros(n * n, jnp.float32),
      "near_degenerate": 1e-6 * jax.random.normal(jax.random.key(1), (n * n,)),
      "random": jax.random.normal(jax.random.key(2), (n * n,)),
  }[point]
  u = lu.unitary_from_lambdas(lam)
  assert u.dtype == jnp.complex64
  assert float(jnp.max(jnp.abs(jnp.conj(u.T) @ u - jnp.eye(n)))) <= 1e-5
  x, y = _data(n, jnp.complex64)
  g = jax.grad(lambda l: _loss(lu.unitary_from_lambdas, l, x, y))(lam)
  assert g.dtype == jnp.float32
  assert np.all(np.isfinite(g))
  ref = jax.grad(lambda l: _loss(_padé_unitary, l, x, y))(lam)
  assert _rel(g, ref) <= 1e-4


def test_orthogonal_from_lambdas(x64):
  mu = jax.random.normal(jax.random.key(4), (10,), jnp.float64)
  r = lu.orthogonal_from_lambdas(mu)
  assert r.dtype == jnp.float64
  np.testing.assert_allclose(r.T @ r, np.eye(5), atol=1e-12)
  assert abs(float(jnp.linalg.det(r)) - 1.0) < 1e-12
  np.testing.assert_allclose(r, jax.scipy.linalg.expm(lu.lambdas_to_skew_symmetric(mu)),
                             atol=1e-12)
  x = jax.random.normal(jax.random.key(5), (5, 3), jnp.float64)
  f = lambda m: jnp.sum(jnp.sin(lu.orthogonal_from_lambdas(m) @ x))
  ref = lambda m: jnp.sum(jnp.sin(jax.scipy.linalg.expm(lu.lambdas_to_skew_symmetric(m)) @ x))
  assert _rel(jax.grad(f)(mu), jax.grad(ref)(mu)) <= 1e-9
  assert _rel(jax.grad(f)(jnp.zeros(10)), jax.grad(ref)(jnp.zeros(10))) <= 1e-9


def test_vmap_and_batch_dims_equal_loop(x64):
  lams = jax.random.normal(jax.random.key(6), (3, 2, 9), jnp.float64)
  one = jax.jit(lu.unitary_from_lambdas)
  loop = jnp.stack([jnp.stack([one(l) for l in row]) for row in lams])
  np.testing.assert_allclose(jax.vmap(jax.vmap(lu.unitary_from_lambdas))(lams), loop,
                             atol=1e-13)
  np.testing.assert_allclose(lu.unitary_from_lambdas(lams), loop, atol=1e-13)
  x, y = _data(3)
  grad = jax.jit(jax.grad(lambda l: _loss(lu.unitary_from_lambdas, l, x, y)))
  g_vmap = jax.vmap(jax.vmap(grad))(lams)
  g_loop = jnp.stack([jnp.stack([grad(l) for l in row]) for row in lams])
  np.testing.assert_allclose(g_vmap, g_loop, atol=1e-12)
  jitted = jax.jit(jax.vmap(grad))(lams[0])
  np.testing.assert_allclose(jitted, g_loop[0], atol=1e-12)


def test_dtype_follows_input(x64):
  assert lu.unitary_from_lambdas(jnp.zeros(4, jnp.float32)).dtype == jnp.complex64
  assert lu.unitary_from_lambdas(jnp.zeros(4, jnp.float64)).dtype == jnp.complex128
  assert lu.expm_skew_hermitian(jnp.zeros((2, 2), jnp.float32)).dtype == jnp.complex64


@pytest.mark.parametrize("bad, match", [
    (jnp.zeros(5), "perfect square"),
    (jnp.zeros(4, jnp.complex64), "REAL"),
    (jnp.float32(1.0), "rank"),
])
def test_bad_lambdas_raise(bad, match):
  with pytest.raises(ValueError, match=match):
    lu.unitary_from_lambdas(bad)


@pytest.mark.parametrize("shape", [(3,), (2, 3), (4, 3, 2)])
def test_non_square_matrix_raises(shape):
  with pytest.raises(ValueError, match="square"):
    lu.expm_skew_hermitian(jnp.zeros(shape, jnp.complex64))


def test_bad_so_lambdas_raise():
  with pytest.raises(ValueError, match=r"n\(n-1\)/2"):
    lu.orthogonal_from_lambdas(jnp.zeros(4))


@pytest.mark.parametrize("method", ["eigh", "pade", "auto"])
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_raises(dtype, method):
  name = jnp.dtype(dtype).name
  with pytest.raises(ValueError, match=rf"lam's dtype must be float32 or float64; got {name}"):
    lu.unitary_from_lambdas(jnp.ones(4, dtype), method=method)
  with pytest.raises(ValueError, match=rf"mu's dtype must be float32 or float64; got {name}"):
    lu.orthogonal_from_lambdas(jnp.ones(3, dtype), method=method)
  with pytest.raises(ValueError, match=rf"skew's dtype must be float32 or float64; got {name}"):
    lu.expm_skew_symmetric(jnp.ones((3, 3), dtype), method=method)


@pytest.mark.parametrize("method", ["eigh", "pade"])
def test_integer_coefficients_are_promoted(method):
  # λ = e_0: U = expm(i e_0 e_0ᵀ) = diag(e^i, 1); μ = (1,): a rotation by 1 radian.
  u = lu.unitary_from_lambdas(jnp.array([1, 0, 0, 0]), method=method)
  assert u.dtype == jnp.complex64
  np.testing.assert_allclose(u, np.diag([np.exp(1j), 1.0]), atol=1e-6)
  r = lu.orthogonal_from_lambdas(jnp.array([1]), method=method)
  assert r.dtype == jnp.float32
  c, s = np.cos(1.0), np.sin(1.0)
  np.testing.assert_allclose(r, [[c, s], [-s, c]], atol=1e-6)


def test_check_method():
  for method in lu.expm.METHODS:
    assert lu.expm.check_method(method) == method
  for bad in ("qr", None, 1):
    with pytest.raises(ValueError, match="method must be one of"):
      lu.expm.check_method(bad)
