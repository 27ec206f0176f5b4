"""The thin Stiefel map (2k < n, O(nk²)): the same Q as expm of the full n×n matrix, and
both derivative modes equal to scipy's Fréchet derivative of expm of that matrix,
at random points, at B = 0 and at rank-deficient B, real and complex, k = 1 to n − 1."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import lie_unitary as lu

pytestmark = pytest.mark.usefixtures("x64", "strict_rank_promotion")


def _full_skew(lam, n, k, complex_):
  """K = [[A, −Bᴴ], [B, 0]] from the documented coefficient order, entry by entry (numpy)."""
  if complex_:
    a = np.einsum("j,jab->ab", lam[:k * k], np.asarray(lu.basis(k)))
    m = (n - k) * k
    b = (lam[k * k:k * k + m] + 1j * lam[k * k + m:]).reshape(n - k, k)
    kk = np.zeros((n, n), complex)
  else:
    rows, cols = np.triu_indices(k, 1)   # row-major upper triangle: the so(k) order
    num_a = len(rows)
    a = np.zeros((k, k))
    a[rows, cols], a[cols, rows] = lam[:num_a], -lam[:num_a]
    b = lam[num_a:].reshape(n - k, k)
    kk = np.zeros((n, n))
  kk[:k, :k], kk[k:, :k], kk[:k, k:] = a, b, -np.conj(b).T
  return kk


def _reference(lam, n, k, complex_):
  """Q = expm(K)[:, :k] and its Jacobian, (P, n, k): column j the Fréchet derivative of
  expm at K in the direction K(e_j) (K is linear in λ), by scipy."""
  kk = _full_skew(lam, n, k, complex_)
  q = scipy.linalg.expm(kk)[:, :k]
  jac = np.stack([scipy.linalg.expm_frechet(kk, _full_skew(e, n, k, complex_),
                                            compute_expm=False)[:, :k]
                  for e in np.eye(len(lam))])
  return q, jac


def _point(n, k, complex_, kind, seed):
  num = lu.num_semi_unitary_params(n, k) if complex_ else lu.num_semi_orthogonal_params(n, k)
  lam = np.random.default_rng(seed).standard_normal(num)
  num_a = k * k if complex_ else k * (k - 1) // 2
  parts = 2 if complex_ else 1
  b = lam[num_a:].reshape(parts, n - k, k)
  if kind == "b_zero":
    b[:] = 0.0
  elif kind == "rank_one":      # every column of B a multiple of the first
    b[:] = b[:, :, :1] * np.arange(1, k + 1)
  lam[num_a:] = b.ravel()
  return lam


CASES = [(3, 1, False), (9, 4, False), (8, 1, True), (9, 4, True), (5, 4, False), (4, 3, True)]
# The quick tier's share: k = 1, k = n − 1, real and complex, each kind of B; the rest slow.
QUICK = {(3, 1, False, "random"), (9, 4, True, "random"), (8, 1, True, "b_zero"),
         (9, 4, False, "rank_one"), (4, 3, True, "rank_one")}


@pytest.mark.parametrize("n,k,complex_,kind", [
    pytest.param(*case, kind, marks=() if case + (kind,) in QUICK else pytest.mark.slow)
    for case in CASES for kind in ("random", "b_zero", "rank_one")])
def test_thin_map_and_derivatives_match_expm_of_the_full_matrix(n, k, complex_, kind):
  """Values, jvp (forward) and vjp (reverse) of the thin path against scipy's expm of the
  assembled n×n K and its Fréchet derivative; the jvp also against central differences;
  all finite. k = n − 1 (5, 4) and (4, 3) force the thin path."""
  fn = functools.partial(lu.semi_unitary_from_lambdas if complex_ else
                         lu.semi_orthogonal_from_lambdas, n=n, k=k, thin=True)
  lam = _point(n, k, complex_, kind, seed=n + 7 * k)
  rng = np.random.default_rng(1)
  tangent = rng.standard_normal(lam.shape)
  cotangent = rng.standard_normal((n, k)) + (1j * rng.standard_normal((n, k)) if complex_ else 0)
  eps = 1e-6

  @jax.jit
  def run(lam, tangent, cotangent):
    q, dq = jax.jvp(fn, (lam,), (tangent,))
    bar = jax.vjp(fn, lam)[1](cotangent)[0]
    central = (fn(lam + eps * tangent) - fn(lam - eps * tangent)) / (2 * eps)
    return q, dq, bar, central

  q, dq, bar, central = jax.tree.map(np.asarray, run(lam, tangent, cotangent))
  q_ref, jac = _reference(lam, n, k, complex_)
  for value in (q, dq, bar):
    assert np.all(np.isfinite(value))
  np.testing.assert_allclose(q, q_ref, atol=1e-12)
  np.testing.assert_allclose(dq, np.einsum("j,jab->ab", tangent, jac), atol=1e-11)
  # JAX's cotangent convention for real inputs: λ̄_j = Re Σ_ab c_ab J_jab (no conjugate).
  np.testing.assert_allclose(bar, np.real(np.einsum("ab,jab->j", cotangent, jac)), atol=1e-11)
  np.testing.assert_allclose(dq, central, atol=1e-7)
  np.testing.assert_allclose(q.conj().T @ q, np.eye(k), atol=1e-12)


@pytest.mark.parametrize("complex_", [False, True])
def test_thin_and_full_paths_agree_with_batch_axes(complex_):
  """The default (thin for 2k < n) against the n×n exponential (thin=False), batched."""
  n, k = 11, 3
  fn = lu.semi_unitary_from_lambdas if complex_ else lu.semi_orthogonal_from_lambdas
  lam = np.stack([_point(n, k, complex_, "random", seed=s) for s in range(3)]).reshape(3, 1, -1)
  thin, full = jax.jit(lambda lam: (fn(lam, n, k), fn(lam, n, k, thin=False)))(lam)
  assert thin.shape == full.shape == (3, 1, n, k)
  np.testing.assert_allclose(thin, full, atol=1e-12)


def test_float32_matches_a_float64_reference_at_a_large_norm():
  """float32 at n = 300, k = 8, coefficients N(0, 1) (‖B‖ ≈ 20): within float32 rounding."""
  n, k = 300, 8
  mu = _point(n, k, False, "random", seed=0)
  q32 = jax.jit(lambda mu: lu.semi_orthogonal_from_lambdas(mu, n, k))(mu.astype(np.float32))
  assert q32.dtype == jnp.float32
  q64 = scipy.linalg.expm(_full_skew(mu, n, k, False))[:, :k]
  np.testing.assert_allclose(np.asarray(q32), q64, atol=2e-5)


def test_thin_argument_is_checked():
  with pytest.raises(ValueError, match="thin must be None, True or False"):
    jax.eval_shape(lambda: lu.semi_orthogonal_from_lambdas(jnp.zeros(2), 3, 1, thin=1))
  with pytest.raises(ValueError, match="thin must be None, True or False"):
    jax.eval_shape(lambda: lu.semi_unitary_from_lambdas(jnp.zeros(5), 3, 1, thin="yes"))
