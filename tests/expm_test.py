"""The spectral derivative rule in reverse mode against Padé autodiff, finite differences
and check_grads (forward mode, second order and the backends: expm_modes_test.py).

Compile-bound: test data come from NumPy, and each check runs one jitted program,
shared by the test cases of one shape (eager calls would compile every primitive).
"""

import jax
import jax.numpy as jnp
from jax.test_util import check_grads
import numpy as np
import pytest
import scipy.linalg

import lie_unitary as lu
from lie_unitary import paper_rule

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")

N = 5


def _data(n, dtype=np.complex128):
  rng = np.random.default_rng(7)
  x, y = (rng.normal(size=(n, 3)) + 1j * rng.normal(size=(n, 3)) for _ in range(2))
  return x.astype(dtype), y.astype(dtype)


def _loss(to_unitary, lam, x, y):
  """A real loss that depends on both real and imaginary parts of every entry of U."""
  u = to_unitary(lam)
  return jnp.sum(jnp.abs(u @ x - y) ** 2) + jnp.sum(jnp.real(u) * jnp.imag(u))


def _padé_unitary(lam):
  return jax.scipy.linalg.expm(lu.lambdas_to_skew_hermitian(lam))


def _lambdas_of(skew):
  """λ_j = Re⟨T_j, L⟩ / ⟨T_j, T_j⟩ for the orthogonal dense basis T_j (NumPy only)."""
  basis = np.asarray(lu.basis(skew.shape[-1], jnp.complex128))
  return np.real(np.einsum("jab,ab->j", basis.conj(), skew)) / np.sum(np.abs(basis) ** 2, (1, 2))


def _repeated_eigenvalue_lambdas(n):
  """λ of W diag(i·[1, 1, 1, -2, -2]) Wᴴ for a random unitary W (QR in NumPy)."""
  rng = np.random.default_rng(3)
  w, _ = np.linalg.qr(rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n)))
  phases = np.array([1.0, 1.0, 1.0, -2.0, -2.0][:n])
  lam = _lambdas_of((w * (1j * phases)) @ w.conj().T)
  np.testing.assert_allclose(np.linalg.eigvalsh(1j * np.tensordot(lam, lu.basis(n), 1)),
                             np.sort(-phases), atol=1e-12)
  return lam


def _points(n):
  lam = np.random.default_rng(0).normal(size=n * n)
  return {
      "random": lam,
      "zero": np.zeros(n * n),
      "repeated": _repeated_eigenvalue_lambdas(n),
      "large": 100.0 * lam / np.linalg.norm(lam),
  }


def _rel(a, b):
  a, b = np.asarray(a), np.asarray(b)
  return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@jax.jit
def _ours_and_pade(lam, x, y):
  """U and the gradient of the loss, by the spectral rule and by Padé autodiff."""
  ours = jax.value_and_grad(lambda l: _loss(lu.unitary_from_lambdas, l, x, y))(lam)[1]
  ref = jax.grad(lambda l: _loss(_padé_unitary, l, x, y))(lam)
  return lu.unitary_from_lambdas(lam), _padé_unitary(lam), ours, ref


@jax.jit
def _ours_and_differences(lam, x, y, step=1e-5):
  """The gradient of the loss and its central differences along every coordinate."""
  loss = lambda l: _loss(lu.unitary_from_lambdas, l, x, y)
  eye = jnp.eye(lam.size, dtype=lam.dtype)
  fd = jax.vmap(lambda e: (loss(lam + step * e) - loss(lam - step * e)) / (2 * step))(eye)
  return jax.grad(loss)(lam), fd


@pytest.mark.parametrize("point", ["random", "zero", "repeated", "large"])
def test_gradient_matches_pade_autodiff(x64, point):
  _, _, ours, ref = _ours_and_pade(_points(N)[point], *_data(N))
  assert np.all(np.isfinite(ours))
  assert _rel(ours, ref) <= 1e-8


@pytest.mark.parametrize("point", ["random", "zero", "repeated", "large"])
def test_gradient_matches_central_finite_differences(x64, point):
  ours, fd = _ours_and_differences(_points(N)[point], *_data(N))
  assert _rel(ours, fd) <= 1e-6


def test_forward_matches_pade(x64):
  for point, lam in _points(N).items():
    u, ref, _, _ = _ours_and_pade(lam, *_data(N))
    np.testing.assert_allclose(u, ref, atol=1e-11, err_msg=point)


def test_paper_per_parameter_rule_agrees(x64):
  @jax.jit
  def run(lam, x, y):
    u, vjp = jax.vjp(lu.unitary_from_lambdas, lam)
    g_u = jax.grad(lambda u: jnp.sum(jnp.abs(u @ x - y) ** 2))(u)
    jac = jnp.moveaxis(jax.jacfwd(_padé_unitary)(lam), -1, 0)
    return paper_rule.paper_gradient(lam, g_u), vjp(g_u)[0], paper_rule.paper_jacobian(lam), jac

  paper_grad, grad, paper_jac, jac = run(_points(N)["random"], *_data(N))
  assert _rel(paper_grad, grad) <= 1e-10
  np.testing.assert_allclose(paper_jac, jac, atol=1e-11)


def test_check_grads_at_general_complex_matrix(x64):
  rng = np.random.default_rng(11)
  general = rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))
  check_grads(jax.jit(lu.expm_skew_hermitian), (general,), order=1, modes=["rev"])
  # Only the skew-Hermitian part is used, and the gradient knows it.
  x, y = _data(4)

  @jax.jit
  def run(m):
    f = lambda m: jnp.sum(jnp.abs(lu.expm_skew_hermitian(m) @ x - y) ** 2)
    ref = lambda m: jnp.sum(jnp.abs(jax.scipy.linalg.expm(0.5 * (m - jnp.conj(m.T))) @ x - y) ** 2)
    return lu.expm_skew_hermitian(m), jax.grad(f)(m), jax.grad(ref)(m)

  u, grad, ref = run(general)
  np.testing.assert_allclose(u, scipy.linalg.expm(0.5 * (general - general.conj().T)), atol=1e-12)
  assert _rel(grad, ref) <= 1e-10


def test_check_grads_through_lambdas(x64):
  f = jax.jit(lu.unitary_from_lambdas)
  for point in ("random", "repeated"):
    check_grads(f, (_points(4)[point],), order=1, modes=["rev"])


@pytest.mark.parametrize("point", ["zero", "near_degenerate", "random"])
def test_complex64_is_unitary_and_finite(point):
  n = 8
  lam = {
      "zero": np.zeros(n * n),
      "near_degenerate": 1e-6 * np.random.default_rng(1).normal(size=n * n),
      "random": np.random.default_rng(2).normal(size=n * n),
  }[point].astype(np.float32)
  u, _, g, ref = _ours_and_pade(lam, *_data(n, np.complex64))
  assert u.dtype == jnp.complex64
  u = np.asarray(u, np.complex128)
  assert np.max(np.abs(u.conj().T @ u - np.eye(n))) <= 1e-5
  assert g.dtype == jnp.float32
  assert np.all(np.isfinite(g))
  assert _rel(g, ref) <= 1e-4


def test_orthogonal_from_lambdas(x64):
  rng = np.random.default_rng(4)
  mu, x = rng.normal(size=10), rng.normal(size=(5, 3))

  @jax.jit
  def run(mu):
    f = lambda m: jnp.sum(jnp.sin(lu.orthogonal_from_lambdas(m) @ x))
    ref = lambda m: jnp.sum(jnp.sin(jax.scipy.linalg.expm(lu.lambdas_to_skew_symmetric(m)) @ x))
    return lu.orthogonal_from_lambdas(mu), jax.grad(f)(mu), jax.grad(ref)(mu)

  r, grad, ref = map(np.asarray, run(mu))
  assert r.dtype == np.float64
  np.testing.assert_allclose(r.T @ r, np.eye(5), atol=1e-12)
  assert abs(np.linalg.det(r) - 1.0) < 1e-12
  skew = np.zeros((5, 5))
  skew[np.triu_indices(5, 1)] = mu   # row-major over the strict upper triangle
  np.testing.assert_allclose(r, scipy.linalg.expm(skew - skew.T), atol=1e-12)
  assert _rel(grad, ref) <= 1e-9
  _, grad, ref = run(np.zeros(10))
  assert _rel(grad, ref) <= 1e-9


def test_vmap_and_batch_dims_equal_loop(x64):
  lams = np.random.default_rng(6).normal(size=(3, 2, 9))
  x, y = _data(3)
  grad = jax.grad(lambda l: _loss(lu.unitary_from_lambdas, l, x, y))
  one = jax.jit(lambda l: (lu.unitary_from_lambdas(l), grad(l)))

  @jax.jit
  def batched(lams):
    return (jax.vmap(jax.vmap(lu.unitary_from_lambdas))(lams), lu.unitary_from_lambdas(lams),
            jax.vmap(jax.vmap(grad))(lams))

  loop = [[one(l) for l in row] for row in lams]
  u_loop = np.array([[u for u, _ in row] for row in loop])
  g_loop = np.array([[g for _, g in row] for row in loop])
  u_vmap, u_batch, g_vmap = batched(lams)
  np.testing.assert_allclose(u_vmap, u_loop, atol=1e-13)
  np.testing.assert_allclose(u_batch, u_loop, atol=1e-13)
  np.testing.assert_allclose(g_vmap, g_loop, atol=1e-12)


def test_dtype_follows_input(x64):
  # Traced only (eval_shape): the dtypes are decided at trace time.
  dtype_of = lambda f, shape, dtype: jax.eval_shape(f, jax.ShapeDtypeStruct(shape, dtype)).dtype
  assert dtype_of(lu.unitary_from_lambdas, (4,), jnp.float32) == jnp.complex64
  assert dtype_of(lu.unitary_from_lambdas, (4,), jnp.float64) == jnp.complex128
  assert dtype_of(lu.expm_skew_hermitian, (2, 2), jnp.float32) == jnp.complex64


@pytest.mark.parametrize("bad, match", [
    (np.zeros(5, np.float32), "perfect square"),
    (np.zeros(4, np.complex64), "REAL"),
    (np.float32(1.0), "rank"),
])
def test_bad_lambdas_raise(bad, match):
  with pytest.raises(ValueError, match=match):
    jax.eval_shape(lu.unitary_from_lambdas, bad)  # traced only: nothing compiles


@pytest.mark.parametrize("shape", [(3,), (2, 3), (4, 3, 2)])
def test_non_square_matrix_raises(shape):
  with pytest.raises(ValueError, match="square"):
    jax.eval_shape(lu.expm_skew_hermitian, jax.ShapeDtypeStruct(shape, jnp.complex64))


def test_bad_so_lambdas_raise():
  with pytest.raises(ValueError, match=r"n\(n-1\)/2"):
    jax.eval_shape(lu.orthogonal_from_lambdas, jax.ShapeDtypeStruct((4,), jnp.float32))


@pytest.mark.parametrize("method", ["eigh", "pade", "auto"])
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_raises(dtype, method):
  name = jnp.dtype(dtype).name
  traced = lambda f, shape: jax.eval_shape(  # nothing compiles
      lambda x: f(x, method=method), jax.ShapeDtypeStruct(shape, dtype))
  with pytest.raises(ValueError, match=rf"lam's dtype must be float32 or float64; got {name}"):
    traced(lu.unitary_from_lambdas, (4,))
  with pytest.raises(ValueError, match=rf"mu's dtype must be float32 or float64; got {name}"):
    traced(lu.orthogonal_from_lambdas, (3,))
  with pytest.raises(ValueError, match=rf"skew's dtype must be float32 or float64; got {name}"):
    traced(lu.expm_skew_symmetric, (3, 3))


@pytest.mark.parametrize("method", ["eigh", "pade"])
def test_integer_coefficients_are_promoted(method):
  # λ = e_0: U = expm(i e_0 e_0ᵀ) = diag(e^i, 1); μ = (1,): a rotation by 1 radian.
  u, r = jax.jit(lambda lam, mu: (lu.unitary_from_lambdas(lam, method=method),
                                  lu.orthogonal_from_lambdas(mu, method=method)))(
                                      np.array([1, 0, 0, 0], np.int32), np.array([1], np.int32))
  assert u.dtype == jnp.complex64
  np.testing.assert_allclose(u, np.diag([np.exp(1j), 1.0]), atol=1e-6)
  assert r.dtype == jnp.float32
  c, s = np.cos(1.0), np.sin(1.0)
  np.testing.assert_allclose(r, [[c, s], [-s, c]], atol=1e-6)


def test_check_method():
  for method in lu.expm.METHODS:
    assert lu.expm.check_method(method) == method
  for bad in ("qr", None, 1):
    with pytest.raises(ValueError, match="method must be one of"):
      lu.expm.check_method(bad)
