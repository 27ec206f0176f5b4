"""u(n)/so(n) bases and coefficient maps against dense sums and the paper's definitions.

Compile-bound: inputs and references come from NumPy and the maps run jitted, one
program per test (eager calls would compile every primitive for every shape).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lie_unitary as lu
from lie_unitary import algebra

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")


def _normal(seed, shape):
  return np.random.default_rng(seed).standard_normal(shape)


def _dense(lam, n):
  """Σ_j λ_j T_j with the dense basis (NumPy, complex128)."""
  with jax.enable_x64(True):   # also for float32 tests: a complex128 reference
    basis = np.asarray(lu.basis(n, jnp.complex128))
  return np.einsum("...j,jab->...ab", lam, basis)


_to_and_from = jax.jit(lambda lam, skew: (lu.lambdas_to_skew_hermitian(lam),
                                          lu.skew_hermitian_to_lambdas(skew)))


@pytest.mark.parametrize("n", [1, 2, 3, 6])
def test_skew_hermitian_equals_dense_basis_sum(x64, n):
  lam = _normal(n, n * n)
  dense = _dense(lam, n)
  skew, back = _to_and_from(lam, dense)
  np.testing.assert_array_equal(skew, dense)
  np.testing.assert_allclose(back, lam, atol=0)


def test_basis_is_the_papers(x64):
  b = lu.basis(2)
  i = 1j
  np.testing.assert_array_equal(b[0], [[i, 0], [0, 0]])
  np.testing.assert_array_equal(b[1], [[0, 0], [0, i]])
  np.testing.assert_array_equal(b[2], [[0, i], [i, 0]])     # symmetric imaginary
  np.testing.assert_array_equal(b[3], [[0, 1], [-1, 0]])    # antisymmetric real
  b = np.asarray(lu.basis(4))
  np.testing.assert_array_equal(b, -np.conj(np.swapaxes(b, 1, 2)))  # skew-Hermitian
  gram = np.real(np.einsum("aij,bij->ab", np.conj(b), b))
  np.testing.assert_array_equal(gram, np.diag(np.diag(gram)))        # orthogonal, rank n²
  # Pair order of blocks 2 and 3: row-major over the strict upper triangle.
  assert b[4 + 1, 0, 2] == 1j and b[4 + 6 + 3, 1, 2] == 1


def test_inverse_projects_general_matrices(x64):
  m = _normal(0, (2, 4, 4)) + 1j * _normal(1, (2, 4, 4))
  skew = 0.5 * (m - np.conj(np.swapaxes(m, -1, -2)))
  projected = jax.jit(lambda m: lu.lambdas_to_skew_hermitian(lu.skew_hermitian_to_lambdas(m)))(m)
  np.testing.assert_allclose(projected, skew, atol=1e-15)


def test_dtypes_and_batches():
  # Traced only (eval_shape): shapes and dtypes are decided at trace time.
  out = jax.eval_shape(lu.lambdas_to_skew_hermitian, jax.ShapeDtypeStruct((2, 3, 9), jnp.float32))
  assert out.shape == (2, 3, 3, 3) and out.dtype == jnp.complex64
  assert jax.eval_shape(lu.skew_hermitian_to_lambdas, out).dtype == jnp.float32
  assert jax.eval_shape(lu.lambdas_to_skew_hermitian, np.arange(4)).dtype == jnp.complex64


def test_vmap_equals_loop():
  lam = _normal(1, (5, 16)).astype(np.float32)
  one = jax.jit(lu.lambdas_to_skew_hermitian)
  loop = np.stack([one(l) for l in lam])
  np.testing.assert_array_equal(jax.jit(jax.vmap(lu.lambdas_to_skew_hermitian))(lam), loop)
  np.testing.assert_array_equal(one(lam), loop)
  np.testing.assert_array_equal(loop, _dense(lam, 4).astype(np.complex64))


def test_never_builds_dense_basis():
  """The jaxpr of L(λ) has no (n², n, n) intermediate: it is an O(n²) gather."""
  n = 12
  jaxpr = jax.make_jaxpr(lu.lambdas_to_skew_hermitian)(jax.ShapeDtypeStruct((n * n,), jnp.float32))
  sizes = [int(np.prod(v.aval.shape)) for eqn in jaxpr.eqns for v in eqn.outvars]
  assert max(sizes) <= n * n + 1


def _original_basis(n):
  """The original code's basis (github.com/ratschlab/uRNN), row-major over the n×n grid:
  element e ↦ (i, j) = divmod(e, n) is i·e_ii for i = j, i at (i, j) and (j, i) for
  i < j, and +1 at (i, j), -1 at (j, i) for i > j (the +1 in the LOWER triangle)."""
  out = np.zeros((n * n, n, n), complex)
  for e in range(n * n):
    i, j = divmod(e, n)
    if i == j:
      out[e, i, i] = 1j
    elif i < j:
      out[e, i, j] = out[e, j, i] = 1j
    else:
      out[e, i, j], out[e, j, i] = 1.0, -1.0
  return out


@pytest.mark.parametrize("n", [1, 3, 5])
def test_original_order_conversion(x64, n):
  lam_orig = _normal(2, n * n)
  dense = np.einsum("j,jab->ab", lam_orig, _original_basis(n))

  @jax.jit
  def run(lam_orig):
    ours = lu.lambdas_from_original_order(lam_orig)
    batch = jnp.stack([lam_orig, 2 * lam_orig])
    return (lu.lambdas_to_skew_hermitian(ours), lu.lambdas_to_original_order(ours),
            lu.lambdas_to_original_order(lu.lambdas_from_original_order(batch)))

  skew, back, batch_back = run(lam_orig)
  np.testing.assert_allclose(skew, dense, atol=1e-15)
  np.testing.assert_array_equal(back, lam_orig)
  np.testing.assert_array_equal(batch_back, np.stack([lam_orig, 2 * lam_orig]))


def test_so_coefficients(x64):
  mu = _normal(3, 10)

  @jax.jit
  def run(mu):
    a = lu.lambdas_to_skew_symmetric(mu)
    # so(n) is the antisymmetric block of u(n).
    lam = jnp.concatenate([jnp.zeros(5 + 10), mu])
    return a, lu.skew_symmetric_to_lambdas(a), lu.lambdas_to_skew_hermitian(lam)

  a, back, skew = map(np.asarray, run(mu))
  np.testing.assert_array_equal(a, -a.T)
  assert a[0, 1] == mu[0] and a[0, 2] == mu[1] and a[1, 2] == mu[4]
  np.testing.assert_array_equal(back, mu)
  np.testing.assert_array_equal(skew, a.astype(np.complex128))


def test_change_basis(x64):
  d = 9
  lam_tilde = _normal(4, d)
  m = np.random.default_rng(5).uniform(-5, 5, (d, d))
  skew = jax.jit(lambda lam_tilde, m: lu.lambdas_to_skew_hermitian(lu.change_basis(lam_tilde, m)))(
      lam_tilde, m)
  # L is the same matrix in both bases: Σ λ̃_j V_j with V_j = Σ_k M_jk T_k.
  new_basis = np.einsum("jk,kab->jab", m, np.asarray(lu.basis(3)))
  np.testing.assert_allclose(skew, np.einsum("j,jab->ab", lam_tilde, new_basis), atol=1e-12)
  with pytest.raises(ValueError, match="shape"):
    lu.change_basis(lam_tilde, m[:, :4])


@pytest.mark.parametrize("num", [2, 3, 5, 8, 10, 0])
def test_non_square_length_raises(num):
  # Traced only (`jax.eval_shape`): the checks run in Python, nothing compiles.
  with pytest.raises(ValueError, match="perfect square"):
    jax.eval_shape(lambda: lu.lambdas_to_skew_hermitian(jnp.zeros(num)))


def test_bad_inputs_raise():
  # Traced only (`jax.eval_shape`): the checks run in Python, nothing compiles.
  with pytest.raises(ValueError, match="REAL"):
    jax.eval_shape(lambda: lu.lambdas_to_skew_hermitian(jnp.zeros(4, jnp.complex64)))
  with pytest.raises(ValueError, match="square"):
    jax.eval_shape(lambda: lu.skew_hermitian_to_lambdas(jnp.zeros((3, 4), jnp.complex64)))
  with pytest.raises(ValueError, match="n must be a positive integer"):
    lu.basis(0)
  with pytest.raises(ValueError, match="n must be a positive integer"):
    lu.basis(2.0)
  assert lu.basis(np.int64(2)).shape == (4, 2, 2)
  for make in (lu.basis, lu.su_basis):  # a real dtype would drop the imaginary entries
    for dtype in (jnp.float32, "foo"):  # nor a name jnp.dtype does not know (its TypeError)
      with pytest.raises(ValueError, match="complex64 or complex128"):
        make(2, dtype)
  with pytest.raises(ValueError, match=r"n\(n-1\)/2"):
    jax.eval_shape(lambda: lu.lambdas_to_skew_symmetric(jnp.zeros(5)))
  with pytest.raises(ValueError, match="real"):
    jax.eval_shape(lambda: lu.skew_symmetric_to_lambdas(jnp.zeros((3, 3), jnp.complex64)))


def test_hermitian_is_i_times_skew_hermitian():
  lam = _normal(8, (2, 16)).astype(np.float32)
  hermitian, skew = jax.jit(lambda lam: (lu.algebra.lambdas_to_hermitian(lam),
                                         lu.lambdas_to_skew_hermitian(lam)))(lam)
  np.testing.assert_allclose(hermitian, 1j * np.asarray(skew), atol=0)


def test_cotangent_to_lambdas_is_the_transpose_of_the_gather(x64):
  lam = _normal(9, 25)
  g = _normal(10, (5, 5)) + 1j * _normal(11, (5, 5))

  @jax.jit
  def run(lam, g):
    _, vjp = jax.vjp(lu.lambdas_to_skew_hermitian, lam)
    return lu.algebra.cotangent_to_lambdas(g), vjp(g)[0]

  ours, transpose = run(lam, g)
  np.testing.assert_allclose(ours, transpose, atol=1e-14)


def test_gathers_work_after_a_float64_trace():
  # The cached index tables once became int64 in a trace under x64 and then broke
  # eager float32 gathers (JAX remembers a NumPy index array's converted dtype).
  with jax.enable_x64(True):
    jax.jit(lu.skew_hermitian_to_lambdas)(np.eye(3, dtype=np.complex128))
  lam = lu.skew_hermitian_to_lambdas(1j * np.eye(3, dtype=np.complex64))  # eager, float32
  np.testing.assert_array_equal(lam, np.r_[np.ones(3), np.zeros(6)].astype(np.float32))


HALF_PRECISION = [jnp.float16, jnp.bfloat16]

# Every public map of coefficients in this module, with coefficients of the right length.
_COEFFICIENT_MAPS = {
    "check_lambdas": lambda d: algebra.check_lambdas(np.ones(4, d)),
    "lambdas_to_skew_hermitian": lambda d: lu.lambdas_to_skew_hermitian(np.ones(4, d)),
    "lambdas_to_hermitian": lambda d: algebra.lambdas_to_hermitian(np.ones(4, d)),
    "lambdas_to_skew_symmetric": lambda d: lu.lambdas_to_skew_symmetric(np.ones(3, d)),
    "lambdas_from_original_order": lambda d: lu.lambdas_from_original_order(np.ones(4, d)),
    "lambdas_to_original_order": lambda d: lu.lambdas_to_original_order(np.ones(4, d)),
    "change_basis": lambda d: lu.change_basis(np.ones(4, d), np.eye(4, dtype=np.float32)),
    "as_real_coefficients": lambda d: algebra.as_real_coefficients(np.ones(4, d)),
}


@pytest.mark.parametrize("dtype", HALF_PRECISION)
@pytest.mark.parametrize("name", sorted(_COEFFICIENT_MAPS))
def test_half_precision_coefficients_raise(name, dtype):
  expected = rf"float32 or float64; got {jnp.dtype(dtype).name}\. Half precision"
  with pytest.raises(ValueError, match=expected):
    jax.eval_shape(lambda: _COEFFICIENT_MAPS[name](dtype))  # traced only: nothing compiles


# Every public map of a matrix to a matrix or coefficients, with a 2×2 input.
_MATRIX_MAPS = {
    f.__name__: f for f in (lu.skew_hermitian_to_lambdas, lu.skew_symmetric_to_lambdas,
                            lu.skew_hermitian_to_su_lambdas, lu.expm_skew_hermitian,
                            lu.log_unitary, lu.lambdas_from_unitary,
                            lu.su_lambdas_from_special_unitary)}


@pytest.mark.parametrize("dtype", HALF_PRECISION)
@pytest.mark.parametrize("name", sorted(_MATRIX_MAPS))
def test_half_precision_matrices_raise(name, dtype):
  # Not computed in float32 behind the caller's back, as the coefficient maps.
  expected = rf"dtype must be float32 or float64; got {jnp.dtype(dtype).name}\. Half precision"
  with pytest.raises(ValueError, match=expected):
    jax.eval_shape(_MATRIX_MAPS[name], jax.ShapeDtypeStruct((2, 2), dtype))


def test_integer_and_bool_matrices_are_promoted_to_the_default_float():
  rotation = np.array([[0, 1], [-1, 0]])  # (0, 1; −1, 0): λ = e₁₂'s real coefficient 1
  np.testing.assert_array_equal(lu.skew_hermitian_to_lambdas(rotation), [0, 0, 0, 1])
  np.testing.assert_array_equal(lu.skew_symmetric_to_lambdas(rotation), [1])
  lam = lu.skew_hermitian_to_lambdas(np.eye(2, dtype=bool))  # the Hermitian part: discarded
  assert lam.dtype == np.float32 and not np.any(np.asarray(lam))


@pytest.mark.parametrize("name", sorted(_COEFFICIENT_MAPS))
def test_complex_coefficients_raise(name):
  with pytest.raises(ValueError, match="REAL coefficients; got dtype complex64"):
    _COEFFICIENT_MAPS[name](jnp.complex64)


def test_integer_coefficients_are_promoted_to_the_default_float():
  # L for λ = (1, 2, 3, 4), n = 2: i·diag(1, 2), 3i on the off-diagonal, then +4 / -4.
  expected = np.array([[1j, 3j + 4], [3j - 4, 2j]])
  # One jitted program (the promotion is decided at trace time).
  skews, real, skew_symmetric = jax.jit(lambda lams, ints, mu: (
      [lu.lambdas_to_skew_hermitian(lam) for lam in lams], algebra.as_real_coefficients(ints),
      lu.lambdas_to_skew_symmetric(mu)))(
          [np.array([1, 2, 3, 4], dtype) for dtype in (np.int32, np.uint8)],
          np.array([1, 2], np.int32), np.array([2]))
  for skew in skews:
    assert skew.dtype == jnp.complex64
    np.testing.assert_array_equal(skew, expected)
  assert real.dtype == jnp.float32
  np.testing.assert_array_equal(skew_symmetric, [[0, 2], [-2, 0]])


def test_check_real_dtype():
  assert algebra.check_real_dtype(jnp.float32) == np.dtype(np.float32)
  assert algebra.check_real_dtype("float64") == np.dtype(np.float64)
  for dtype in HALF_PRECISION:
    with pytest.raises(ValueError, match="param_dtype=jnp.float32"):
      algebra.check_real_dtype(dtype, "param")
  for dtype in (jnp.int32, jnp.complex64, bool):
    with pytest.raises(ValueError, match=r"^x must be float32 or float64; got \w+\.$"):
      algebra.check_real_dtype(dtype, "x")
  with pytest.raises(ValueError, match="must be float32 or float64; got 'no such dtype'"):
    algebra.check_real_dtype("no such dtype")


def test_check_finite_real():
  assert algebra.check_finite_real(0, "x") == 0.0
  value = algebra.check_finite_real(np.float32(0.5), "x", positive=True)
  assert value == 0.5 and type(value) is float
  assert algebra.check_finite_real(None, "x", allow_none=True) is None
  bad = (None, True, np.True_, "1", -1e-9, np.inf, np.nan, 1j, np.ones(1))
  for value in bad:
    with pytest.raises(ValueError, match=r"^x must be a finite float ≥ 0; got "):
      algebra.check_finite_real(value, "x")
  with pytest.raises(ValueError, match=r"^x must be a finite float > 0 or None; got 0\.$"):
    algebra.check_finite_real(0, "x", positive=True, allow_none=True)


@pytest.mark.parametrize("n", [1, 2, 5])
def test_entry_positions(n):
  diagonal, upper, lower = algebra.entry_positions(n)
  rows, cols = np.triu_indices(n, 1)
  np.testing.assert_array_equal(np.divmod(diagonal, n), (np.arange(n), np.arange(n)))
  np.testing.assert_array_equal(np.divmod(upper, n), (rows, cols))
  np.testing.assert_array_equal(np.divmod(lower, n), (cols, rows))
  # The basis elements are nonzero exactly there: T_a at the diagonal, blocks 2 and 3
  # at the pair's upper and lower entries.
  flat = np.asarray(lu.basis(n)).reshape(n * n, n * n)
  for j, a in enumerate(diagonal):
    assert np.flatnonzero(flat[j]).tolist() == [a]
  m = rows.size
  for j in range(m):
    expected = sorted([upper[j], lower[j]])
    assert np.flatnonzero(flat[n + j]).tolist() == expected
    assert np.flatnonzero(flat[n + m + j]).tolist() == expected
  for p in (diagonal, upper, lower):
    assert p.dtype == np.int32 and not p.flags.writeable
  with pytest.raises(ValueError, match="n must be a positive integer"):
    algebra.entry_positions(0)


def test_as_square_matrix():
  m = algebra.as_square_matrix(np.ones((2, 3, 3), np.float32), "m")
  assert isinstance(m, jax.Array) and m.shape == (2, 3, 3) and m.dtype == jnp.float32
  for shape in [(3,), (2, 3), (3, 3, 2)]:
    with pytest.raises(ValueError, match=r"m must be square with shape \(\.\.\., n, n\)"):
      algebra.as_square_matrix(np.ones(shape), "m")
