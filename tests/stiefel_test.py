"""Stiefel maps: orthonormal columns, the documented coefficient order, minimal counts,
the k = n maps, Jacobians (reverse and forward mode) against central differences, their
full rank, and the tangent space at 0."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import lie_unitary as lu

pytestmark = pytest.mark.usefixtures("x64", "strict_rank_promotion")


def _reference_unitary(lam, n, k):
  """expm of K assembled entry by entry from the documented order (dense basis for A)."""
  lam = np.asarray(lam)
  kk = np.zeros((n, n), complex)
  kk[:k, :k] = np.einsum("j,jab->ab", lam[:k * k], np.asarray(lu.basis(k)))
  m = (n - k) * k
  b = (lam[k * k:k * k + m] + 1j * lam[k * k + m:]).reshape(n - k, k)
  kk[k:, :k], kk[:k, k:] = b, -b.conj().T
  return scipy.linalg.expm(kk)[:, :k]


def _reference_orthogonal(mu, n, k):
  mu = np.asarray(mu)
  kk = np.zeros((n, n))
  j = 0
  for r in range(k):
    for s in range(r + 1, k):
      kk[r, s], kk[s, r] = mu[j], -mu[j]
      j += 1
  b = mu[j:].reshape(n - k, k)
  kk[k:, :k], kk[:k, k:] = b, -b.T
  return scipy.linalg.expm(kk)[:, :k]


def _rank(mat, rtol=1e-8):
  s = np.linalg.svd(mat, compute_uv=False)
  return int(np.sum(s > rtol * s[0]))


def _tangent_space(n, k, complex_):
  """A basis of T_{E_k}, the null space of Δ ↦ E_kᴴΔ + ΔᴴE_k on real-stacked Δ (by SVD)."""
  dim = (2 if complex_ else 1) * n * k
  columns = []
  for e in np.eye(dim):
    delta = (e[:n * k] + 1j * e[n * k:]).reshape(n, k) if complex_ else e.reshape(n, k)
    sym = delta[:k].conj().T + delta[:k]
    columns.append(np.concatenate([sym.real.ravel(), sym.imag.ravel()]))
  constraint = np.array(columns).T
  _, s, vh = np.linalg.svd(constraint)
  return constraint, vh[int(np.sum(s > 1e-10)):].T


def _stacked(q):
  """[Re Q, Im Q] (complex Q) or Q, flattened over the last two axes: a real vector."""
  parts = [jnp.real(q), jnp.imag(q)] if jnp.iscomplexobj(q) else [q]
  return jnp.concatenate([p.reshape(p.shape[:-2] + (-1,)) for p in parts], axis=-1)


# k = n is the square map (test_square_case_is_the_square_map; expm_test covers it).
CASES = [(4, 2, True), (2, 1, True), (3, 1, False), (4, 3, False), (4, 2, False)]


@pytest.mark.parametrize("n,k,complex_", CASES)
def test_map(n, k, complex_):
  """One compiled program per case (batch axes, vmap, jacrev), checked against SciPy's
  expm of K assembled from the documented order, central differences and the tangent space."""
  if complex_:
    num, fn, reference = (lu.num_semi_unitary_params(n, k),
                          functools.partial(lu.semi_unitary_from_lambdas, n=n, k=k),
                          _reference_unitary)
  else:
    num, fn, reference = (lu.num_semi_orthogonal_params(n, k),
                          functools.partial(lu.semi_orthogonal_from_lambdas, n=n, k=k),
                          _reference_orthogonal)
  # Inputs and checks in NumPy: only `run` is compiled.
  x = 0.5 * np.random.default_rng(n + 10 * k).standard_normal(num)
  eps = 1e-5
  steps = eps * np.eye(num)
  points = np.concatenate([x[None], np.zeros((1, num)), x[None] + steps, x[None] - steps])

  @jax.jit
  def run(points):
    q = fn(points)                                  # batch axes
    jac = jax.vmap(jax.jacrev(lambda l: _stacked(fn(l))))(points[:2])
    return q, _stacked(q), jax.vmap(fn)(points), jac

  q, stacked, q_mapped, (jac, jac0) = jax.tree.map(np.asarray, run(points))
  assert q.shape == (2 + 2 * num, n, k)
  assert q.dtype == (np.complex128 if complex_ else np.float64)
  np.testing.assert_allclose(q_mapped, q, atol=1e-14)
  qh_q = np.einsum("bik,bil->bkl", q.conj(), q)
  np.testing.assert_allclose(qh_q, np.broadcast_to(np.eye(k), qh_q.shape), atol=1e-12)
  np.testing.assert_allclose(q[0], reference(x, n, k), atol=1e-10)
  np.testing.assert_allclose(q[1], np.eye(n)[:, :k], atol=1e-15)    # λ = 0: E_k

  # Reverse mode against central differences; full real rank = the manifold's dimension.
  np.testing.assert_allclose(jac, (stacked[2:2 + num] - stacked[2 + num:]).T / (2 * eps),
                             atol=1e-8)
  assert jac.shape == ((2 if complex_ else 1) * n * k, num)
  assert _rank(jac) == num
  # At 0 the image of the Jacobian is the tangent space at E_k (null space of the constraint).
  constraint, tangent = _tangent_space(n, k, complex_)
  assert tangent.shape[1] == num
  np.testing.assert_allclose(constraint @ jac0, 0.0, atol=1e-12)    # image ⊆ T
  assert _rank(jac0) == num                                         # dim image = dim T
  assert _rank(np.concatenate([jac0, tangent], axis=1)) == num


@pytest.mark.parametrize("n", [1, 3])
def test_square_case_is_the_square_map(n):
  rng = np.random.default_rng(n)
  lam, mu = rng.standard_normal(n * n), rng.standard_normal(n * (n - 1) // 2)

  @jax.jit
  def both(lam, mu):
    square_o = lu.orthogonal_from_lambdas(mu) if n >= 2 else jnp.ones((1, 1))
    return (lu.semi_unitary_from_lambdas(lam, n, n), lu.unitary_from_lambdas(lam),
            lu.semi_orthogonal_from_lambdas(mu, n, n), square_o)

  semi_u, square_u, semi_o, square_o = both(lam, mu)
  np.testing.assert_array_equal(semi_u, square_u)
  np.testing.assert_array_equal(semi_o, square_o)


def test_parameter_counts_are_the_manifold_dimensions():
  # dim_R V_k(C^n) = 2nk - k², dim V_k(R^n) = nk - k(k+1)/2 (k = n: n², n(n-1)/2).
  expected_u = {(5, 3): 21, (3, 1): 5, (4, 4): 16, (1, 1): 1}
  expected_o = {(5, 3): 9, (3, 1): 2, (4, 4): 6, (4, 3): 6, (1, 1): 0}
  for (n, k), num in expected_u.items():
    assert lu.num_semi_unitary_params(n, k) == num
  for (n, k), num in expected_o.items():
    assert lu.num_semi_orthogonal_params(n, k) == num


@pytest.mark.parametrize("n,k,complex_", [(4, 2, True), (4, 3, False)])
def test_forward_mode_matches_central_differences(n, k, complex_):
  """jvp along a random direction = central differences; jacfwd = jacrev; and (once, as
  its program is large) the "pade" method gives the same matrix."""
  if complex_:
    num = lu.num_semi_unitary_params(n, k)
    fn = functools.partial(lu.semi_unitary_from_lambdas, n=n, k=k)
  else:
    num = lu.num_semi_orthogonal_params(n, k)
    fn = functools.partial(lu.semi_orthogonal_from_lambdas, n=n, k=k)
  rng = np.random.default_rng(3 * n + k)
  x, v = 0.5 * rng.standard_normal(num), rng.standard_normal(num)
  eps = 1e-5

  @jax.jit
  def run(x, v):
    stacked = lambda l: _stacked(fn(l))
    _, tangent = jax.jvp(stacked, (x,), (v,))
    return (tangent, stacked(x + eps * v), stacked(x - eps * v),
            jax.jacfwd(stacked)(x), jax.jacrev(stacked)(x),
            fn(x), fn(x, method="pade") if not complex_ else fn(x))

  tangent, plus, minus, forward, reverse, eigh, pade = jax.tree.map(np.asarray, run(x, v))
  np.testing.assert_allclose(tangent, (plus - minus) / (2 * eps), atol=1e-8)
  np.testing.assert_allclose(forward, reverse, atol=1e-12)
  np.testing.assert_allclose(pade, eigh, atol=1e-12)


def test_bad_input_raises():
  # Traced only (`jax.eval_shape`): the checks run in Python, nothing compiles.
  with pytest.raises(ValueError, match="1 ≤ k ≤ n"):
    jax.eval_shape(lambda: lu.semi_unitary_from_lambdas(jnp.zeros(0), 2, 3))
  with pytest.raises(ValueError, match="1 ≤ k ≤ n"):
    lu.num_semi_orthogonal_params(3, 0)
  with pytest.raises(ValueError, match="integer"):
    jax.eval_shape(lambda: lu.semi_orthogonal_from_lambdas(jnp.zeros(2), 3.0, 1))
  with pytest.raises(ValueError, match="integer"):
    lu.num_semi_unitary_params(3, True)
  with pytest.raises(ValueError, match=r"\(\.\.\., 5\)"):
    jax.eval_shape(lambda: lu.semi_unitary_from_lambdas(jnp.zeros(6), 3, 1))
  with pytest.raises(ValueError, match=r"\(\.\.\., 2\)"):
    jax.eval_shape(lambda: lu.semi_orthogonal_from_lambdas(jnp.zeros((4, 3)), 3, 1))
  with pytest.raises(ValueError, match="REAL"):
    jax.eval_shape(lambda: lu.semi_unitary_from_lambdas(jnp.zeros(5, jnp.complex128), 3, 1))
  with pytest.raises(ValueError, match=r"\(\.\.\., 2\)"):
    jax.eval_shape(lambda: lu.semi_orthogonal_from_lambdas(jnp.float64(0.0), 3, 1))
  with pytest.raises(ValueError, match="method must be one of"):
    jax.eval_shape(lambda: lu.semi_orthogonal_from_lambdas(jnp.zeros(0), 1, 1, method="qr"))


@pytest.mark.parametrize("n, k", [(3, 1), (3, 3)])
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_raises(dtype, n, k):
  name = jnp.dtype(dtype).name
  # Traced only (`jax.eval_shape`): the checks run in Python, nothing compiles.
  lam = jax.ShapeDtypeStruct((lu.num_semi_unitary_params(n, k),), dtype)
  with pytest.raises(ValueError, match=rf"lam's dtype must be float32 or float64; got {name}"):
    jax.eval_shape(lambda lam: lu.semi_unitary_from_lambdas(lam, n, k), lam)
  mu = jax.ShapeDtypeStruct((lu.num_semi_orthogonal_params(n, k),), dtype)
  with pytest.raises(ValueError, match=rf"mu's dtype must be float32 or float64; got {name}"):
    jax.eval_shape(lambda mu: lu.semi_orthogonal_from_lambdas(mu, n, k), mu)


def test_integer_coefficients_are_promoted():
  # n = 2, k = 1, real: A is empty (so(1)), B = (1,): the first column of a rotation by 1.
  q = jax.jit(lambda mu: lu.semi_orthogonal_from_lambdas(mu, 2, 1))(np.array([1], np.int32))
  assert q.dtype == jnp.float64  # the default float under this module's x64
  np.testing.assert_allclose(q, [[np.cos(1.0)], [np.sin(1.0)]], atol=1e-12)
