"""Learned bases of u(n), principal angles and Procrustes against independent references:
Padé autodiff and central differences, NumPy/SciPy SVDs, dense commutators.

Compile-bound: data come from NumPy and each check runs one jitted program.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import lie_unitary as lu

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")

N, K = 3, 5


def _rng(seed):
  return np.random.default_rng(seed)


def _rel(a, b):
  a, b = np.asarray(a), np.asarray(b)
  return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _data(n, seed=7):
  rng = _rng(seed)
  x, y = (rng.normal(size=(n, 3)) + 1j * rng.normal(size=(n, 3)) for _ in range(2))
  return x, y


def _loss_of(u, x, y):
  """A real loss reading real and imaginary parts of every entry of U (..., n, n)."""
  y = jnp.reshape(y, (1,) * (u.ndim - 2) + y.shape)          # batch axes of U, explicitly
  return jnp.sum(jnp.abs(u @ x - y) ** 2) + jnp.sum(jnp.real(u) * jnp.imag(u))


def _pade_from_basis(c, m):
  """expm(L(c @ M)) by Padé, λ = c @ M written out (no library code but the L map)."""
  lam = jnp.einsum("...k,kd->...d", c, m)
  return jax.scipy.linalg.expm(lu.lambdas_to_skew_hermitian(lam))


@jax.jit
def _gradients(c, m, x, y):
  """∂/∂(c, M) by the spectral rule, by Padé autodiff, and by central differences."""
  ours = lambda c, m: _loss_of(lu.unitary_from_basis(c, m, method="eigh"), x, y)
  pade = lambda c, m: _loss_of(_pade_from_basis(c, m), x, y)
  flat = jnp.concatenate([c.ravel(), m.ravel()])
  unflat = lambda v: (v[:c.size].reshape(c.shape), v[c.size:].reshape(m.shape))
  step = 1e-5
  fd = jax.vmap(lambda e: (ours(*unflat(flat + step * e)) - ours(*unflat(flat - step * e)))
                / (2 * step))(jnp.eye(flat.size, dtype=flat.dtype))
  value, grads = jax.value_and_grad(ours, argnums=(0, 1))(c, m)
  return value, grads, jax.grad(pade, argnums=(0, 1))(c, m), unflat(fd)


@pytest.mark.parametrize("batch", [(), (2,)])
def test_gradients_match_pade_autodiff_and_finite_differences(x64, batch):
  rng = _rng(0)
  c, m = rng.normal(size=batch + (K,)), rng.normal(size=(K, N * N)) / 2
  value, ours, pade, fd = _gradients(c, m, *_data(N))
  assert np.isfinite(value)
  for name, g, p, f in zip("cM", ours, pade, fd):
    assert g.shape == p.shape and np.all(np.isfinite(g)), name
    assert _rel(g, p) <= 1e-8, name
    assert _rel(g, f) <= 1e-6, name


def _count(jaxpr, name):
  """How often primitive `name` occurs in a jaxpr, its sub-jaxprs included."""
  total = 0
  for eqn in jaxpr.eqns:
    total += eqn.primitive.name == name
    for param in eqn.params.values():
      for sub in param if isinstance(param, (list, tuple)) else [param]:
        sub = getattr(sub, "jaxpr", sub)
        if hasattr(sub, "eqns"):
          total += _count(sub, name)
  return total


def test_value_and_gradient_take_one_eigh_and_no_second_exponential():
  x, y = (a.astype(np.complex64) for a in _data(N))
  loss = lambda c, m: _loss_of(lu.unitary_from_basis(c, m, method="eigh"), x, y)
  args = (np.ones(K, np.float32), np.ones((K, N * N), np.float32))
  jaxpr = jax.make_jaxpr(jax.value_and_grad(loss, argnums=(0, 1)))(*args).jaxpr
  assert _count(jaxpr, "eigh") == 1
  for padé_primitive in ("lu", "triangular_solve"):      # jax.scipy.linalg.expm's solve
    assert _count(jaxpr, padé_primitive) == 0


def test_gradients_are_the_chain_rule_through_lambda(x64):
  # ∂/∂c = M λ̄ and ∂/∂M = c ⊗ λ̄, λ̄ the gradient of the same loss at λ = c @ M.
  rng = _rng(1)
  c, m = rng.normal(size=K), rng.normal(size=(K, N * N))
  x, y = _data(N)

  @jax.jit
  def run(c, m):
    grads = jax.grad(lambda c, m: _loss_of(lu.unitary_from_basis(c, m), x, y), (0, 1))(c, m)
    lam_bar = jax.grad(lambda l: _loss_of(lu.unitary_from_lambdas(l), x, y))(c @ m)
    return grads, lam_bar

  (g_c, g_m), lam_bar = run(c, m)
  np.testing.assert_allclose(g_c, m @ np.asarray(lam_bar), rtol=1e-12, atol=1e-12)
  np.testing.assert_allclose(g_m, np.outer(c, lam_bar), rtol=1e-12, atol=1e-12)


def test_forward_equals_unitary_from_lambdas_and_is_unitary(x64):
  rng = _rng(2)
  c, m = rng.normal(size=(4, K)), rng.normal(size=(K, N * N))
  run = jax.jit(lambda c, m: (lu.unitary_from_basis(c, m), lu.unitary_from_lambdas(c @ m)))
  u, ref = run(c, m)
  assert u.shape == (4, N, N) and u.dtype == jnp.complex128
  np.testing.assert_allclose(u, ref, atol=1e-13)
  eye = np.broadcast_to(np.eye(N), u.shape)
  np.testing.assert_allclose(np.conj(np.swapaxes(u, -1, -2)) @ u, eye, atol=1e-13)


def test_dtypes_follow_the_inputs():
  f32 = jax.ShapeDtypeStruct((K,), jnp.float32)
  out = jax.eval_shape(lu.unitary_from_basis, f32, jax.ShapeDtypeStruct((K, 9), jnp.float32))
  assert out.shape == (3, 3) and out.dtype == jnp.complex64
  with jax.enable_x64(True):
    out = jax.eval_shape(lu.unitary_from_basis, f32, jax.ShapeDtypeStruct((K, 9), jnp.float64))
    assert out.dtype == jnp.complex128


def test_orthogonal_and_special_unitary_variants(x64):
  rng = _rng(3)
  n = 4
  c = rng.normal(size=3)
  m_so, m_su = rng.normal(size=(3, n * (n - 1) // 2)), rng.normal(size=(3, n * n - 1))

  @jax.jit
  def run(c, m_so, m_su):
    return (lu.orthogonal_from_basis(c, m_so), lu.orthogonal_from_lambdas(c @ m_so),
            lu.special_unitary_from_basis(c, m_su), lu.special_unitary_from_lambdas(c @ m_su))

  r, r_ref, s, s_ref = run(c, m_so, m_su)
  np.testing.assert_allclose(r, r_ref, atol=1e-13)
  np.testing.assert_allclose(s, s_ref, atol=1e-13)
  np.testing.assert_allclose(r.T @ r, np.eye(n), atol=1e-13)
  assert np.linalg.det(r) == pytest.approx(1.0) and np.linalg.det(s) == pytest.approx(1.0)
  # The so(n) generators: R = expm(Σ_a c_a A(M_a)) with a dense SciPy expm.
  dense = np.einsum("a,aij->ij", c, lu.lambdas_to_skew_symmetric(m_so))
  np.testing.assert_allclose(r, scipy.linalg.expm(dense), atol=1e-12)


def test_a_full_invertible_basis_reaches_every_unitary(x64):
  n = 3
  rng = _rng(4)
  m = rng.uniform(-5, 5, size=(n * n, n * n))        # appendix B's change of basis
  # The linear map c -> L(c @ M) is onto u(n): rank n² as a map into R^{2n²}.
  images = np.asarray(lu.lambdas_to_skew_hermitian(m)).reshape(n * n, -1)
  assert np.linalg.matrix_rank(np.concatenate([images.real, images.imag], axis=1)) == n * n
  # A Haar-random target: c solves c @ M = λ(U) for its logarithm's coefficients.
  @jax.jit
  def draw(key):
    u = lu.random_unitary(key, n, dtype=jnp.complex128)
    return u, lu.lambdas_from_unitary(u)

  target, lam = map(np.asarray, draw(jax.random.key(0)))
  c = np.linalg.solve(m.T, lam)
  np.testing.assert_allclose(jax.jit(lu.unitary_from_basis)(c, m), target, atol=1e-11)
  # The random init with k = n² is orthogonal, so full rank.
  rand = np.asarray(lu.random_basis(jax.random.key(1), n, n * n, dtype=jnp.float64))
  assert np.linalg.matrix_rank(rand) == n * n
  np.testing.assert_allclose(rand @ rand.T, np.eye(n * n), atol=1e-14)


@pytest.mark.parametrize("algebra_name, n", [("u", 3), ("so", 4), ("su", 3)])
def test_initialisers_have_orthonormal_rows(x64, algebra_name, n):
  d = lu.basis_dimension(n, algebra_name)
  for scheme, k in (("random", d - 1), ("standard", 2), ("toroidal", 1)):
    m = np.asarray(jax.jit(lu.init_basis, static_argnums=(1, 2, 3, 4, 5))(
        jax.random.key(2), n, k, scheme, algebra_name, jnp.float64))
    assert m.shape == (k, d) and m.dtype == np.float64, scheme
    np.testing.assert_allclose(m @ m.T, np.eye(k), atol=1e-14, err_msg=scheme)
  np.testing.assert_array_equal(lu.standard_basis(None, n, 2, algebra_name), np.eye(2, d))
  assert jax.eval_shape(lambda key: lu.random_basis(key, n, 2, algebra_name),
                        jax.random.key(0)).dtype == jnp.float32
  # Pure functions of the key: vmapped over keys, one draw per key.
  keys = jax.random.split(jax.random.key(3), 2)
  draws = jax.jit(jax.vmap(lambda key: lu.toroidal_basis(key, n, 1, algebra_name,
                                                         jnp.float64)))(keys)
  assert draws.shape == (2, 1, d) and not np.allclose(draws[0], draws[1])


def _commutator_norm(g):
  """max over a, b of ‖[G_a, G_b]‖ for dense matrices g (k, n, n) (NumPy)."""
  comm = np.einsum("aij,bjk->abik", g, g) - np.einsum("bij,ajk->abik", g, g)
  return np.abs(comm).max()


_toroidal = jax.jit(lu.toroidal_basis, static_argnums=(1, 2, 3, 4))


def test_toroidal_elements_commute_and_are_skew_hermitian(x64):
  n = 4
  m = np.asarray(_toroidal(jax.random.key(3), n, n, "u", jnp.float64))
  g = np.einsum("ad,dij->aij", m, np.asarray(lu.basis(n)))      # dense sums Σ_b M_ab T_b
  assert _commutator_norm(g) < 1e-14
  np.testing.assert_allclose(g, -np.conj(np.swapaxes(g, 1, 2)), atol=0)
  assert np.linalg.matrix_rank(m) == n
  # su(n): traceless; so(n): real skew-symmetric, rotations in orthogonal planes.
  m_su = np.asarray(_toroidal(jax.random.key(4), n, n - 1, "su", jnp.float64))
  g_su = np.einsum("ad,dij->aij", m_su, np.asarray(lu.su_basis(n)))
  assert _commutator_norm(g_su) < 1e-14
  np.testing.assert_allclose(np.trace(g_su, axis1=1, axis2=2), 0, atol=1e-14)
  m_so = np.asarray(_toroidal(jax.random.key(5), 5, 2, "so", jnp.float64))
  g_so = np.asarray(lu.lambdas_to_skew_symmetric(m_so))
  assert _commutator_norm(g_so) < 1e-14 and np.linalg.matrix_rank(m_so) == 2


_angles = jax.jit(lu.principal_angles)


def _rotation_pair(theta, d=6):
  """[e0, e1] and [cos θ e0 + sin θ e3, e1]: principal angles 0 and θ."""
  e = np.eye(d)
  return e[:2], np.stack([np.cos(theta) * e[0] + np.sin(theta) * e[3], e[1]])


def test_principal_angles_of_known_subspaces(x64):
  for theta in (0.3, 1.2, 1e-10):      # 1e-10: arccos alone would give 0 (or ~1e-8)
    a, b = _rotation_pair(theta)
    np.testing.assert_allclose(_angles(a, b), [0, theta], rtol=1e-12, atol=1e-15)
  rng = _rng(5)
  a = rng.normal(size=(3, 9))
  np.testing.assert_allclose(_angles(a, rng.normal(size=(3, 3)) @ a), 0, atol=1e-14)
  e = np.eye(9)
  np.testing.assert_allclose(_angles(e[:3], e[3:7]), np.pi / 2, rtol=1e-15)


def test_principal_angles_match_scipy_and_ignore_the_bases(x64):
  rng = _rng(6)
  a, b = rng.normal(size=(3, 9)), rng.normal(size=(4, 9))
  ref = np.sort(scipy.linalg.subspace_angles(a.T, b.T))        # column spaces in SciPy
  theta = _angles(a, b)
  assert theta.shape == (3,)
  np.testing.assert_allclose(theta, ref, rtol=1e-12)
  change_a, change_b = rng.normal(size=(3, 3)), rng.normal(size=(4, 4))
  np.testing.assert_allclose(_angles(change_a @ a, change_b @ b), ref, rtol=1e-10)
  np.testing.assert_allclose(_angles(b, a), ref, rtol=1e-12)
  assert jax.jit(lu.principal_angles)(a.astype(np.float32), b).dtype == jnp.float64


def test_principal_angles_of_rank_deficient_inputs(x64):
  rng = _rng(7)
  a, b = rng.normal(size=(2, 9)), rng.normal(size=(4, 9))
  deficient = np.stack([a[0], a[1], a[0] - 2 * a[1]])           # rank 2 in 3 rows
  ref = np.sort(scipy.linalg.subspace_angles(a.T, b.T))
  np.testing.assert_allclose(_angles(deficient, b), [*ref, np.pi / 2], rtol=1e-10)
  np.testing.assert_allclose(_angles(deficient, deficient), [0, 0, np.pi / 2], atol=1e-14)
  np.testing.assert_allclose(_angles(np.zeros((2, 9)), b), np.pi / 2, rtol=1e-15)
  # A NaN or inf entry is no subspace: NaN angles, not π/2 as for a rank-0 input.
  for bad in (np.nan, np.inf):
    assert np.all(np.isnan(_angles(deficient, np.where(np.arange(9) == 3, bad, b))))


_procrustes = jax.jit(lu.procrustes_unitary)


def _numpy_procrustes(x, y):
  """The polar factor of Σ_i y_i x_iᴴ = Yᵀ conj(X), by NumPy's SVD."""
  p, _, qh = np.linalg.svd(y.T @ np.conj(x))
  return p @ qh


def _fit_loss(u, x, y):
  return np.sum(np.abs(x @ np.swapaxes(u, -1, -2) - y) ** 2, axis=(-2, -1))


def test_procrustes_recovers_the_truth_and_matches_numpy(x64):
  rng = _rng(8)
  n, p = 4, 10
  truth = np.asarray(lu.random_unitary(jax.random.key(6), n, dtype=jnp.complex128))
  x = rng.normal(size=(p, n)) + 1j * rng.normal(size=(p, n))
  u = np.asarray(_procrustes(x, x @ truth.T))
  np.testing.assert_allclose(u, truth, atol=1e-13)
  y = x @ truth.T + 0.3 * (rng.normal(size=(p, n)) + 1j * rng.normal(size=(p, n)))
  u = np.asarray(_procrustes(x, y))
  np.testing.assert_allclose(u, _numpy_procrustes(x, y), atol=1e-13)
  np.testing.assert_allclose(u.conj().T @ u, np.eye(n), atol=1e-14)
  # No other unitary fits better: Haar draws, and small steps U expm(εK) around U.
  others = np.asarray(jax.vmap(lambda k: lu.random_unitary(k, n, dtype=jnp.complex128))(
      jax.random.split(jax.random.key(7), 200)))
  steps = np.asarray(lu.unitary_from_lambdas(1e-3 * rng.normal(size=(200, n * n))))
  best = _fit_loss(u, x, y)
  assert best < _fit_loss(others, x, y).min()
  assert best < _fit_loss(u @ steps, x, y).min()


def test_procrustes_real_and_batched(x64):
  rng = _rng(9)
  n, p = 3, 8
  reflection = np.diag([1.0, 1.0, -1.0])                       # det -1: in O(n), not SO(n)
  truth = np.linalg.qr(rng.normal(size=(n, n)))[0]
  truth = truth * np.sign(np.linalg.det(truth)) @ reflection
  x = rng.normal(size=(2, p, n))
  y = np.stack([x[0] @ truth.T, x[1] @ truth.T + 0.1 * rng.normal(size=(p, n))])
  u = np.asarray(_procrustes(x, y))
  assert u.shape == (2, n, n) and u.dtype == np.float64
  np.testing.assert_allclose(u[0], truth, atol=1e-13)
  assert np.linalg.det(u[0]) == pytest.approx(-1.0)
  np.testing.assert_allclose(u[1], _numpy_procrustes(x[1], y[1]), atol=1e-13)
  assert jax.jit(lu.procrustes_unitary)(x.astype(np.float32), y.astype(np.complex64)).dtype == (
      jnp.complex64)


@pytest.mark.parametrize("call, match", [
    (lambda: lu.unitary_from_basis(np.ones(2), np.ones((3, 9))), r"c.shape=\(2,\)"),
    (lambda: lu.unitary_from_basis(np.ones(10), np.ones((10, 9))), "k ≤ 9"),
    (lambda: lu.unitary_from_basis(np.ones(2), np.ones((2, 8))), r"\(k, n²\)"),
    (lambda: lu.unitary_from_basis(np.ones(2), np.ones(9)), "non-empty matrix"),
    (lambda: lu.unitary_from_basis(np.ones(2), np.ones((2, 9)) * 1j), "must be real"),
    (lambda: lu.unitary_from_basis(np.ones(2, complex), np.ones((2, 9))), "REAL"),
    (lambda: lu.unitary_from_basis(np.ones(2), np.ones((2, 9), np.float16)), "Half precision"),
    (lambda: lu.unitary_from_basis(np.ones(2, jnp.bfloat16), np.ones((2, 9))), "float32"),
    (lambda: lu.unitary_from_basis(np.ones(2), np.ones((2, 9)), "cayley"), "method"),
    (lambda: lu.orthogonal_from_basis(np.ones(2), np.ones((2, 9))), r"n\(n-1\)/2"),
    (lambda: lu.special_unitary_from_basis(np.ones(2), np.ones((2, 9))), "n² - 1"),
    (lambda: lu.random_basis(jax.random.key(0), 3, 10), "1 ≤ k ≤ 9"),
    (lambda: lu.random_basis(jax.random.key(0), 3, 0), "1 ≤ k ≤ 9"),
    (lambda: lu.random_basis(jax.random.key(0), 3.0, 2), "n must be an integer"),
    (lambda: lu.random_basis(jax.random.key(0), 3, 2, dtype=jnp.float16), "Half precision"),
    (lambda: lu.random_basis(jax.random.key(0), 3, 2, "sp"), "algebra must be one of"),
    (lambda: lu.toroidal_basis(jax.random.key(0), 3, 4), "rank of a torus"),
    (lambda: lu.toroidal_basis(jax.random.key(0), 5, 3, "so"), "1 ≤ k ≤ 2"),
    (lambda: lu.init_basis(jax.random.key(0), 3, 2, "uniform"), "unknown basis init"),
    (lambda: lu.principal_angles(np.ones((2, 4)), np.ones((2, 5))), "same d"),
    (lambda: lu.principal_angles(np.ones((5, 4)), np.ones((2, 4))), "k ≤ d"),
    (lambda: lu.principal_angles(np.ones((2, 4)), np.ones((2, 4)) * 1j), "b must be real"),
    (lambda: lu.principal_angles(np.ones((2, 4), np.float16), np.ones((2, 4))), "Half"),
    (lambda: lu.principal_angles(np.ones((2, 4)), np.ones((2, 4)), -1.0), "rtol"),
    (lambda: lu.principal_angles(np.ones((2, 4)), np.ones((2, 4)), True), "rtol"),
    (lambda: lu.procrustes_unitary(np.ones((5, 3)), np.ones((5, 4))), "same shape"),
    (lambda: lu.procrustes_unitary(np.ones(3), np.ones(3)), "same shape"),
    (lambda: lu.procrustes_unitary(*[np.ones((5, 3), np.float16)] * 2), "float16"),
    (lambda: lu.procrustes_unitary(np.ones((5, 3), np.float16), np.ones((5, 3))),
     "x's .real. dtype must be float32 or float64; got float16"),  # not promoted
])
def test_bad_input_raises_value_error(call, match):
  with pytest.raises(ValueError, match=match):
    call()
