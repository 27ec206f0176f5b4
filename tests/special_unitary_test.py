"""SU(n) through su(n): the basis, expm against SciPy's Padé, the traceless logarithm, gradients.

Compile-bound: every library call is jitted once per shape, and the checks run in NumPy.
"""

import jax
import jax.numpy as jnp
from jax.test_util import check_grads
import numpy as np
import pytest
import scipy.linalg

import lie_unitary as lu

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")

NS = (2, 3, 4, 5)
_exp = jax.jit(lu.special_unitary_from_lambdas)
_log = jax.jit(lu.su_lambdas_from_special_unitary)
_skew = jax.jit(lu.su_lambdas_to_skew_hermitian)
_coefficients = jax.jit(lu.skew_hermitian_to_su_lambdas)


def _haar(rng, n, num):
  """`num` Haar-random U(n) matrices (NumPy: QR of a complex Gaussian, R's phases fixed)."""
  z = rng.normal(size=(num, n, n)) + 1j * rng.normal(size=(num, n, n))
  q, r = np.linalg.qr(z)
  d = np.diagonal(r, axis1=-2, axis2=-1)
  return q * (d / np.abs(d))[:, None, :]


def _haar_su(rng, n, num):
  """Haar-random U(n) matrices divided by an n-th root of their determinants: Haar SU(n)."""
  u = _haar(rng, n, num)
  return u * np.exp(-1j * np.angle(np.linalg.det(u)) / n)[:, None, None]


def _assert_special_unitary(u, atol):
  u = np.asarray(u)
  eye = np.broadcast_to(np.eye(u.shape[-1]), u.shape)
  np.testing.assert_allclose(np.conj(np.swapaxes(u, -1, -2)) @ u, eye, atol=atol)
  np.testing.assert_allclose(np.linalg.det(u), 1.0, atol=atol)


@pytest.mark.parametrize("n", NS)
def test_basis_is_an_orthogonal_basis_of_su_n(x64, n):
  basis = np.asarray(lu.su_basis(n))
  assert basis.shape == (n * n - 1, n, n)
  np.testing.assert_allclose(np.trace(basis, axis1=1, axis2=2), 0, atol=1e-15)
  np.testing.assert_array_equal(basis, -np.conj(np.swapaxes(basis, 1, 2)))
  # Trace inner product Re tr(S_iᴴ S_j): diagonal block norm 1, off-diagonal norm √2.
  gram = np.real(np.einsum("iab,jab->ij", np.conj(basis), basis))
  np.testing.assert_allclose(gram, np.diag([1.0] * (n - 1) + [2.0] * (n * (n - 1))),
                             atol=1e-14)
  # n² - 1 independent real vectors: they span su(n), whose real dimension is n² - 1.
  flat = np.concatenate([basis.real, basis.imag], axis=1).reshape(n * n - 1, -1)
  assert np.linalg.matrix_rank(flat) == n * n - 1
  # The off-diagonal block is u(n)'s, in the same order.
  np.testing.assert_array_equal(basis[n - 1:], np.asarray(lu.basis(n))[n:])
  # The last diagonal element is i·diag(1, …, 1, -k)/√(k(k+1)), k = n - 1.
  k = n - 1
  np.testing.assert_allclose(np.diag(basis[k - 1]).imag,
                             np.r_[np.ones(k), -k] / np.sqrt(k * (k + 1)), atol=1e-15)


def _normal(seed, shape):
  return np.random.default_rng(seed).standard_normal(shape)


@pytest.mark.parametrize("n", NS)
def test_forward_matches_pade_expm(x64, n):
  mu = _normal(n, (6, n * n - 1))
  dense = np.einsum("...j,jab->...ab", mu, np.asarray(lu.su_basis(n)))
  np.testing.assert_allclose(_skew(mu), dense, atol=1e-14)
  u = _exp(mu)
  assert u.shape == (6, n, n) and u.dtype == jnp.complex128
  np.testing.assert_allclose(u, [scipy.linalg.expm(d) for d in dense], atol=1e-12)
  _assert_special_unitary(u, 1e-12)


@pytest.mark.parametrize("n", NS)
def test_round_trips(x64, n):
  # μ -> U -> μ for small μ (the principal log), U -> μ -> U for Haar SU(n), one batch.
  small = 0.3 * _normal(n, (6, n * n - 1))
  haar = _haar_su(np.random.default_rng(n), n, 6)
  mu_back = np.asarray(_log(np.concatenate([_exp(small), haar])))
  np.testing.assert_allclose(mu_back[:6], small, atol=1e-10)
  np.testing.assert_allclose(_exp(mu_back[6:]), haar, atol=1e-9)


def test_coefficients_are_the_orthogonal_projection(x64):
  n = 4
  rng = np.random.default_rng(0)
  a = rng.normal(size=(3, n, n)) + 1j * rng.normal(size=(3, n, n))
  basis = np.asarray(lu.su_basis(n))
  norms2 = np.real(np.einsum("jab,jab->j", np.conj(basis), basis))
  ref = np.real(np.einsum("jab,...ab->...j", np.conj(basis), a)) / norms2
  np.testing.assert_allclose(_coefficients(a), ref, atol=1e-13)
  # Adding a Hermitian part and a multiple of i·I changes nothing.
  mu = rng.normal(size=(3, n * n - 1))
  skew = np.einsum("...j,jab->...ab", mu, basis) + a + np.conj(np.swapaxes(a, 1, 2))
  np.testing.assert_allclose(_coefficients(skew + 0.7j * np.eye(n)), mu, atol=1e-13)


def test_principal_log_with_nonzero_trace(x64):
  # Phases θ, θ, -2θ with θ = 0.9π: the principal phases are θ, θ, 2π - 2θ, summing to
  # 2π (m = 1; m = -1 for the conjugate phases). One of the two phases of largest
  # magnitude moves by ∓2π: eigenphases ±{θ, θ - 2π, 2π - 2θ}, the smallest-norm
  # traceless log.
  theta = 0.9 * np.pi
  w = _haar(np.random.default_rng(5), 3, 1)[0]
  signs = np.array([1.0, -1.0])
  phases = signs[:, None] * np.array([theta, theta, -2 * theta])
  u = (w * np.exp(1j * phases)[:, None, :]) @ np.conj(w.T)
  principal = np.angle(np.linalg.eigvals(u))
  np.testing.assert_allclose(np.sum(principal, axis=-1), 2 * np.pi * signs, atol=1e-12)
  mu = _log(u)
  np.testing.assert_allclose(_exp(mu), u, atol=1e-10)
  got = np.sort(-np.linalg.eigvalsh(1j * np.asarray(_skew(mu))), axis=-1)
  want = np.sort(signs[:, None] * np.array([theta, theta - 2 * np.pi, 2 * np.pi - 2 * theta]),
                 axis=-1)
  np.testing.assert_allclose(got, want, atol=1e-9)


def test_minus_identity_and_near_branch_cut(x64):
  # -I ∈ SU(4): every principal phase is π (m = 2). Beside it, phases just inside ±π.
  n = 4
  w = _haar(np.random.default_rng(6), n, 1)[0]
  eps = 1e-3
  phases = np.array([np.pi - eps, np.pi - eps, np.pi - eps, -3 * np.pi + 3 * eps])
  u = np.stack([-np.eye(n), (w * np.exp(1j * phases)) @ np.conj(w.T)])
  np.testing.assert_allclose(_exp(_log(u)), u, atol=1e-9)


def test_derivatives_match_finite_differences(x64):
  n = 3
  mu = _normal(7, n * n - 1)
  # Reverse mode against central differences along random directions (complex output).
  check_grads(_exp, (mu,), order=1, modes=("rev",), atol=1e-6, rtol=1e-6)
  # Forward mode explicitly: jvp against central differences, and at μ = 0 (all
  # eigenvalues equal) the closed form dU = L(v).
  v = _normal(8, mu.shape)
  jvp = jax.jit(lambda m, t: jax.jvp(lu.special_unitary_from_lambdas, (m,), (t,)))
  u, du = jvp(mu, v)
  np.testing.assert_allclose(u, _exp(mu), atol=1e-15)
  h = 1e-5
  fd = (np.asarray(_exp(mu + h * v)) - np.asarray(_exp(mu - h * v))) / (2 * h)
  np.testing.assert_allclose(du, fd, atol=1e-8)
  _, du0 = jvp(np.zeros_like(mu), v)
  np.testing.assert_allclose(du0, np.einsum("j,jab->ab", v, np.asarray(lu.su_basis(n))),
                             atol=1e-14)


def test_float32():
  mu = _normal(9, 8).astype(np.float32)
  u = _exp(mu)
  assert u.dtype == jnp.complex64
  assert _log(u).dtype == jnp.float32
  _assert_special_unitary(np.asarray(u, np.complex128), 2e-6)


def test_bad_input_raises():
  # Traced only (`jax.eval_shape`): the checks run in Python, so nothing needs compiling.
  traced = lambda f, *args, **kwargs: jax.eval_shape(lambda: f(*args, **kwargs))
  with pytest.raises(ValueError, match="n² - 1 entries"):
    traced(lu.special_unitary_from_lambdas, np.zeros(9, np.float32))
  with pytest.raises(ValueError, match="n² - 1 entries"):
    traced(lu.su_lambdas_to_skew_hermitian, np.zeros((2, 0), np.float32))
  with pytest.raises(ValueError, match="REAL"):
    traced(lu.special_unitary_from_lambdas, np.zeros(3, np.complex64))
  with pytest.raises(ValueError, match="rank"):
    traced(lu.special_unitary_from_lambdas, np.float32(1.0))
  with pytest.raises(ValueError, match="n ≥ 2"):
    traced(lu.su_lambdas_from_special_unitary, np.ones((1, 1), np.complex64))
  with pytest.raises(ValueError, match="square"):
    traced(lu.skew_hermitian_to_su_lambdas, np.zeros((2, 3), np.float32))
  with pytest.raises(ValueError, match="n ≥ 2"):
    lu.su_basis(1)
  with pytest.raises(ValueError, match="method must be one of"):
    traced(lu.special_unitary_from_lambdas, np.zeros(3, np.float32), method="cayley")
  assert lu.n_from_num_su_lambdas(24) == 5
  for bad in (0, 3.0, True, "8", None):
    with pytest.raises(ValueError, match=f"got {bad!r}"):
      lu.n_from_num_su_lambdas(bad)
  for count in (lu.n_from_num_lambdas, lu.algebra.n_from_num_so_lambdas):
    for bad in (4.0, True):
      with pytest.raises(ValueError, match=f"entries for an integer n ≥ .; got {bad}"):
        count(bad)


def test_parametrization(x64):
  p = lu.get_parametrization("special_unitary")
  n = 3
  params, constants = jax.jit(lambda key: p.init(key, n, jnp.float64))(jax.random.key(11))
  assert params["mu"].shape == (n * n - 1,) and params["mu"].dtype == jnp.float64
  assert p.num_trainable(n) == n * n - 1 and not p.is_orthogonal
  u = jax.jit(lambda q, c: p.to_unitary(p.post_update(q, c), c))(params, constants)
  np.testing.assert_allclose(u, _exp(params["mu"]), atol=1e-15)
  _assert_special_unitary(u, 1e-12)
  with pytest.raises(ValueError, match="n ≥ 2"):
    p.init(jax.random.key(0), 1)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_raises(dtype):
  expected = rf"mu's dtype must be float32 or float64; got {jnp.dtype(dtype).name}"
  for fn in (lu.special_unitary_from_lambdas, lu.su_lambdas_to_skew_hermitian,
             lu.special_unitary.check_su_lambdas):
    with pytest.raises(ValueError, match=expected):
      fn(jnp.ones(3, dtype))


def test_integer_coefficients_are_promoted():
  # μ = e_1 for n = 2: D_1 = i·diag(1, -1)/√2, so U = diag(e^{i/√2}, e^{-i/√2}).
  u = jax.jit(lu.special_unitary_from_lambdas)(np.array([1, 0, 0], np.int32))
  assert u.dtype == jnp.complex64
  phase = np.exp(1j / np.sqrt(2))
  np.testing.assert_allclose(u, np.diag([phase, np.conj(phase)]), atol=1e-6)
