"""A learned basis of u(n) (so(n), su(n)), principal angles between subspaces, Procrustes.

The paper fixes the basis T_1..T_{n²} of u(n) (§2.2) and notes that it could instead be
learned (§1, related work), the choice of basis mattering for optimisation (appendix
B). A learned basis is a real matrix M (k, d), k ≤ d, whose rows are k elements of the
algebra as coefficient vectors in the standard basis: G_a = Σ_b M_ab T_b, d = n² for
u(n) (`lie_unitary.algebra.basis`), n(n-1)/2 for so(n) (`lambdas_to_skew_symmetric`)
and n² - 1 for su(n) (`lie_unitary.special_unitary.su_basis`). Coefficients c (k,) give

    λ = Mᵀ c = c @ M   (appendix B's λ = λ̃ᵀ M, `algebra.change_basis`, for k = d),
    U = expm(Σ_a c_a G_a) = expm(L(λ)).

For k = d and M invertible every U(n) (SO(n), SU(n)) element is reachable; for k < d the
k-dimensional subspace span(G) is, and U runs over the images of its elements.

Derivatives: `unitary_from_basis` is ``unitary_from_lambdas(c @ M)``, so autodiff
composes the linear map with the exact spectral rule of `lie_unitary.expm` (one eigh,
no second exponential, O(n³)): with λ̄ the gradient there, ∂/∂c = M λ̄ and ∂/∂M = c ⊗ λ̄
(summed over batch axes of c), one k×d matmul and one outer product on top.

Initialisers, each a function of a PRNG key returning M (k, d) with orthonormal rows:
``random`` (a uniformly random k-dimensional subspace: QR of a Gaussian), ``standard``
(the first k standard basis elements: rows of the identity), ``toroidal`` (a commuting
subalgebra, the Lie algebra of a torus: k ≤ n for u(n), n - 1 for su(n), n // 2 for
so(n)).

Also here, for comparing and fitting: `principal_angles` between two subspaces (e.g. a
learned span(M) and the true one) and `procrustes_unitary`, the closed-form
least-squares unitary fit to input/output pairs.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import algebra
from lie_unitary import expm
from lie_unitary import generators
from lie_unitary import parametrizations
from lie_unitary import special_unitary
from lie_unitary.precision import matmul as mm

__all__ = [
    "ALGEBRAS",
    "BASIS_INITS",
    "basis_dimension",
    "init_basis",
    "orthogonal_from_basis",
    "principal_angles",
    "procrustes_unitary",
    "random_basis",
    "special_unitary_from_basis",
    "standard_basis",
    "toroidal_basis",
    "unitary_from_basis",
]

# The algebras a basis matrix can live in: u(n), so(n), su(n).
ALGEBRAS = ("u", "so", "su")
BASIS_INITS = ("random", "standard", "toroidal")


def _check_algebra(which) -> str:
  if not isinstance(which, str) or which not in ALGEBRAS:
    raise ValueError(f"algebra must be one of {ALGEBRAS}; got {which!r}.")
  return which


def _check_int(value, name: str) -> int:
  if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
    raise ValueError(f"{name} must be an integer; got {value!r}.")
  return int(value)


def basis_dimension(n: int, algebra_name: str = "u") -> int:
  """d, the dimension of the algebra: n² for u(n), n(n-1)/2 for so(n), n² - 1 for su(n).

  Args:
    n: matrix size, an integer ≥ 1 (≥ 2 for "so" and "su").
    algebra_name: "u", "so" or "su".

  Returns:
    d, an int.

  Raises:
    ValueError: for an unknown algebra, or n not an integer ≥ 1 (≥ 2 for so, su).
  """
  _check_algebra(algebra_name)
  n = _check_int(n, "n")
  least = 1 if algebra_name == "u" else 2
  if n < least:
    raise ValueError(f"{algebra_name}(n) needs n ≥ {least}; got {n=}.")
  return {"u": n * n, "so": n * (n - 1) // 2, "su": n * n - 1}[algebra_name]


def _n_from_dimension(d: int, algebra_name: str) -> int:
  return {"u": algebra.n_from_num_lambdas, "so": algebra.n_from_num_so_lambdas,
          "su": special_unitary.n_from_num_su_lambdas}[algebra_name](d)


def _as_real_matrix(mat, what: str) -> jax.Array:
  """`mat` as a real float32/float64 matrix (k, d), k ≥ 1, d ≥ 1 (integers promoted)."""
  mat = jnp.asarray(mat)
  if jnp.iscomplexobj(mat):
    raise ValueError(f"{what} must be real; got dtype {mat.dtype}.")
  if mat.ndim != 2 or 0 in mat.shape:
    raise ValueError(f"{what} must be a non-empty matrix (k, d); got {mat.shape=}.")
  if jnp.issubdtype(mat.dtype, jnp.floating):
    algebra.check_real_dtype(mat.dtype, f"{what}'s dtype")
  else:
    mat = mat.astype(jnp.result_type(float))
  return mat


_DIMENSION_NAMES = {"u": "n²", "so": "n(n-1)/2", "su": "n² - 1"}


def _check_basis_matrix(basis_matrix, algebra_name: str) -> tuple[jax.Array, int]:
  """M as a real (k, d) array with d the algebra's dimension for some n and 1 ≤ k ≤ d."""
  m = _as_real_matrix(basis_matrix, "basis_matrix")
  k, d = m.shape
  dim = _DIMENSION_NAMES[algebra_name]
  try:
    n = _n_from_dimension(d, algebra_name)
  except ValueError as error:
    raise ValueError(f"basis_matrix must have shape (k, {dim}) for {algebra_name}(n), its rows "
                     f"coefficient vectors; got {m.shape=}.") from error
  if k > d:
    raise ValueError(f"basis_matrix has more rows (k = {k}) than {algebra_name}({n}) has "
                     f"dimensions ({dim} = {d}); need k ≤ {d}: got {m.shape=}.")
  return m, n


def _standard_coefficients(coefficients, basis_matrix, algebra_name: str) -> jax.Array:
  """λ = c @ M, checked, in the common float dtype of c and M."""
  m, _ = _check_basis_matrix(basis_matrix, algebra_name)
  c = algebra.as_real_coefficients(coefficients, "coefficients")
  if c.shape[-1] != m.shape[0]:
    raise ValueError(f"coefficients must have shape (..., k) with k = {m.shape[0]}, the rows "
                     f"of basis_matrix; got {c.shape=} for {m.shape=}.")
  dtype = jnp.result_type(c.dtype, m.dtype)
  return mm(c.astype(dtype), m.astype(dtype))


def unitary_from_basis(coefficients, basis_matrix, method: str = "auto") -> jax.Array:
  """U = expm(Σ_a c_a G_a) for the basis elements G_a = Σ_b M_ab T_b of u(n).

  ``unitary_from_lambdas(c @ M, method)``: derivatives with respect to both c and M go
  through the spectral rule of `lie_unitary.expm` (one eigh for the value and the
  gradient, with method "eigh"), ∂/∂c = M λ̄, ∂/∂M = c ⊗ λ̄ (module docstring).

  Args:
    coefficients: real array (..., k), float32 or float64 (integers are promoted).
    basis_matrix: real array (k, n²), k ≤ n², float32 or float64; row a holds the
      coefficients of G_a in the basis of `lie_unitary.algebra.basis(n)`.
    method: "eigh", "pade", "taylor" or "auto", as in `lie_unitary.expm.expm_skew_hermitian`
      ("auto" decides from the batch size of `coefficients`).

  Returns:
    Complex array (..., n, n), unitary: complex64 if both inputs are float32, complex128
    if either is float64.

  Raises:
    ValueError: if `basis_matrix` is not a real (k, n²) matrix with 1 ≤ k ≤ n², if
      `coefficients` is complex, a scalar or its last axis is not k, if either is half
      precision (float16, bfloat16), or for an unknown method.
  """
  expm.check_method(method)
  return expm.unitary_from_lambdas(_standard_coefficients(coefficients, basis_matrix, "u"),
                                   method)


def orthogonal_from_basis(coefficients, basis_matrix, method: str = "auto") -> jax.Array:
  """R = expm(Σ_a c_a G_a) ∈ SO(n) for a learned basis G_a = Σ_b M_ab A_b of so(n).

  ``orthogonal_from_lambdas(c @ M, method)``, with its derivatives (as
  `unitary_from_basis`).

  Args:
    coefficients: real array (..., k), float32 or float64 (integers are promoted).
    basis_matrix: real array (k, n(n-1)/2), n ≥ 2, k ≤ n(n-1)/2; rows are so(n)
      coefficient vectors in the order of `lie_unitary.algebra.lambdas_to_skew_symmetric`.
    method: "eigh", "pade", "taylor" or "auto", as in `lie_unitary.expm.expm_skew_symmetric`.

  Returns:
    Real array (..., n, n) of the common dtype, orthogonal with determinant +1.

  Raises:
    ValueError: as `unitary_from_basis`, with n(n-1)/2 for n².
  """
  expm.check_method(method)
  return expm.orthogonal_from_lambdas(_standard_coefficients(coefficients, basis_matrix, "so"),
                                      method)


def special_unitary_from_basis(coefficients, basis_matrix, method: str = "auto") -> jax.Array:
  """U = expm(Σ_a c_a G_a) ∈ SU(n) for a learned basis G_a = Σ_b M_ab S_b of su(n).

  ``special_unitary_from_lambdas(c @ M, method)``, with its derivatives (as
  `unitary_from_basis`).

  Args:
    coefficients: real array (..., k), float32 or float64 (integers are promoted).
    basis_matrix: real array (k, n² - 1), n ≥ 2, k ≤ n² - 1; rows are su(n) coefficient
      vectors in the order of `lie_unitary.special_unitary.su_basis`.
    method: "eigh", "pade", "taylor" or "auto", as in `lie_unitary.expm.expm_skew_hermitian`.

  Returns:
    Complex array (..., n, n), unitary with determinant 1 (to rounding).

  Raises:
    ValueError: as `unitary_from_basis`, with n² - 1 for n².
  """
  expm.check_method(method)
  return special_unitary.special_unitary_from_lambdas(
      _standard_coefficients(coefficients, basis_matrix, "su"), method)


def _check_init(n, k, algebra_name, dtype, most=None, what="the algebra's dimension"):
  """(n, k, d, dtype) for an initialiser, checked: 1 ≤ k ≤ `most` (default d)."""
  d = basis_dimension(n, algebra_name)
  k = _check_int(k, "k")
  most = d if most is None else most
  if not 1 <= k <= most:
    raise ValueError(f"need 1 ≤ k ≤ {most} ({what} for {algebra_name}({n})); got {k=}.")
  return int(n), k, d, algebra.check_real_dtype(dtype, "dtype")


def _orthonormal_rows(rows) -> jax.Array:
  """An orthonormal basis (k, d) of the row space of `rows` (k, d), rank k (QR)."""
  q, _ = jnp.linalg.qr(jnp.matrix_transpose(rows))
  return jnp.matrix_transpose(q)


def random_basis(key, n: int, k: int, algebra_name: str = "u", dtype=jnp.float32) -> jax.Array:
  """A uniformly random k-dimensional subspace of the algebra, as orthonormal rows.

  Q of the QR decomposition of a d×k standard Gaussian matrix, transposed: its row
  space is uniform on the Grassmannian. For k = d, M is orthogonal, and c ~ N(0, I_d)
  gives λ = c @ M ~ N(0, I_d), the paper's initial λ.

  Args:
    key: PRNG key.
    n: matrix size, an integer ≥ 1 (≥ 2 for "so" and "su"); static.
    k: the number of basis elements, 1 ≤ k ≤ d (`basis_dimension(n, algebra_name)`).
    algebra_name: "u" (d = n²), "so" (n(n-1)/2) or "su" (n² - 1).
    dtype: float32 or float64.

  Returns:
    Real array (k, d) of `dtype` with orthonormal rows (M Mᵀ = I_k).

  Raises:
    ValueError: for an unknown algebra, n or k not integers, k outside [1, d], or a
      dtype other than float32 and float64.
  """
  n, k, d, dtype = _check_init(n, k, _check_algebra(algebra_name), dtype)
  return _orthonormal_rows(jax.random.normal(key, (k, d), dtype))


def standard_basis(key, n: int, k: int, algebra_name: str = "u",
                   dtype=jnp.float32) -> jax.Array:
  """The first k elements of the standard basis: the first k rows of the identity (d×d).

  For k = d this is the paper's fixed basis, and c = λ.

  Args:
    key: unused (the signature of the other initialisers); may be None.
    n, k, algebra_name, dtype: as `random_basis`.

  Returns:
    Real array (k, d) of `dtype`.

  Raises:
    ValueError: as `random_basis`.
  """
  del key
  n, k, d, dtype = _check_init(n, k, _check_algebra(algebra_name), dtype)
  return jnp.eye(k, d, dtype=dtype)


def toroidal_basis(key, n: int, k: int, algebra_name: str = "u",
                   dtype=jnp.float32) -> jax.Array:
  """A random commuting (toroidal) subalgebra of dimension k, as orthonormal rows.

  The elements are diagonal generators conjugated by one random V, so they commute:

  - "u": G_a = V (i e_a e_aᵀ) Vᴴ, a < k ≤ n, V Haar-random unitary;
  - "su": G_a = V (i (e_a e_aᵀ - e_{a+1} e_{a+1}ᵀ)) Vᴴ, a < k ≤ n - 1 (traceless);
  - "so": G_a = V (e_{2a} e_{2a+1}ᵀ - e_{2a+1} e_{2a}ᵀ) Vᵀ, a < k ≤ n // 2, V
    Haar-random orthogonal (commuting rotations in orthogonal planes; the toroidal
    subgroups of SO(n) of Cohen & Welling, cited in the paper's §1).

  Their coefficient vectors are then orthonormalised (QR, which takes linear
  combinations, so the rows still commute). For the largest k the span is a maximal
  torus' algebra: every U = expm(L(c @ M)) is V diag(e^{iφ}) Vᴴ (u(n)).

  Args:
    key: PRNG key.
    n: matrix size, an integer ≥ 1 (≥ 2 for "so" and "su"); static.
    k: 1 ≤ k ≤ n ("u"), n - 1 ("su") or n // 2 ("so"), the rank of the torus.
    algebra_name: "u", "so" or "su".
    dtype: float32 or float64.

  Returns:
    Real array (k, d) of `dtype` with orthonormal rows whose elements commute.

  Raises:
    ValueError: for an unknown algebra, n or k not integers, k outside [1, rank], or a
      dtype other than float32 and float64.
  """
  basis_dimension(n, algebra_name)  # checks the algebra and n
  rank = {"u": n, "su": n - 1, "so": n // 2}[algebra_name]
  n, k, d, dtype = _check_init(n, k, algebra_name, dtype, rank, "the rank of a torus")
  if algebra_name == "so":
    v = jax.random.orthogonal(key, n, dtype=dtype)
    first, second = v[:, 0:2 * k:2], v[:, 1:2 * k:2]                      # (n, k) each
    outer = first.T[:, :, None] * second.T[:, None, :]                     # (k, n, n)
    rows = algebra.skew_symmetric_to_lambdas(outer - jnp.matrix_transpose(outer))
  else:
    v = generators.random_unitary(key, n, "haar", algebra.complex_dtype_for(dtype))
    cols = jnp.matrix_transpose(v)                                         # (n, n): rows = v_a
    projectors = cols[:, :, None] * jnp.conj(cols)[:, None, :]             # v_a v_aᴴ
    if algebra_name == "u":
      rows = algebra.skew_hermitian_to_lambdas(1j * projectors[:k])
    else:
      rows = special_unitary.skew_hermitian_to_su_lambdas(
          1j * (projectors[:k] - projectors[1:k + 1]))
  return _orthonormal_rows(rows.astype(dtype))


_INITIALISERS = {"random": random_basis, "standard": standard_basis, "toroidal": toroidal_basis}


def init_basis(key, n: int, k: int, scheme: str = "random", algebra_name: str = "u",
               dtype=jnp.float32) -> jax.Array:
  """A learned basis' initial M (k, d) by the scheme's name (one of `BASIS_INITS`).

  Args:
    key: PRNG key.
    n, k, algebra_name, dtype: as `random_basis` (k ≤ the torus' rank for "toroidal").
    scheme: "random" (`random_basis`), "standard" (`standard_basis`) or "toroidal"
      (`toroidal_basis`).

  Returns:
    Real array (k, d) of `dtype` with orthonormal rows.

  Raises:
    ValueError: for an unknown scheme, and as the scheme's function.
  """
  if not isinstance(scheme, str) or scheme not in BASIS_INITS:
    raise ValueError(f"unknown basis init scheme {scheme!r}; expected one of {BASIS_INITS}.")
  return _INITIALISERS[scheme](key, n, k, algebra_name, dtype)


def _row_space(mat, rtol):
  """Orthonormal rows spanning mat's row space (the rest zeroed) and its numerical rank.

  SVD mat = P Σ Qᵀ; the rows of Qᵀ whose singular value exceeds rtol·σ_max are kept.
  """
  k, d = mat.shape
  _, s, qt = jnp.linalg.svd(mat, full_matrices=False)                   # qt (k, d), k ≤ d
  if rtol is None:
    rtol = max(k, d) * jnp.finfo(mat.dtype).eps
  keep = s > rtol * s[0]
  return qt * keep[:, None].astype(qt.dtype), jnp.sum(keep)


def principal_angles(a, b, rtol: float | None = None) -> jax.Array:
  """Principal angles between the row spaces of two real matrices, ascending, in radians.

  Subspaces of u(n) (so(n), su(n)) as row spaces of coefficient matrices (k, d), e.g. a
  learned basis M and the generators of the truth. With orthonormal bases Q_A, Q_B of the
  row spaces and the SVD Q_A Q_Bᵀ = Y diag(cos θ) Zᵀ (Björck & Golub, 1973), the
  principal vectors u_i = Q_Aᵀ y_i and v_i = Q_Bᵀ z_i have angles θ_i. Near 0, arccos
  loses half the digits (θ ≈ √(2(1 - cos θ)): an error of ε in cos θ is one of √ε in
  θ); so for θ_i ≤ π/4 (cos² θ_i ≥ 1/2) the angle is arcsin of the sine, computed as
  ‖v_i - cos θ_i u_i‖ from the principal vectors (absolute error O(ε)), and arccos(cos θ_i)
  above π/4, where it is as accurate. Angles are in [0, π/2].

  Rank: the row spaces are orthonormalised by SVD (not QR, which does not reveal rank);
  a direction counts when its singular value exceeds ``rtol`` times the largest
  (default max(k, d)·ε, as `numpy.linalg.matrix_rank`). For numerical ranks r_A, r_B the
  first min(r_A, r_B) angles are those of the row spaces, and the remaining
  min(k_A, k_B) - min(r_A, r_B) entries are π/2: a dimension one subspace lacks counts as
  orthogonal to the other (an all-zero input gives all π/2). Ranks are decided at run
  time, so this is jit-friendly; the output shape is static.

  Not meant to be differentiated: SVDs have no derivative at repeated singular values
  (e.g. identical subspaces).

  Args:
    a: real array (k_A, d), 1 ≤ k_A ≤ d, float32 or float64 (integers are promoted).
    b: real array (k_B, d), 1 ≤ k_B ≤ d.
    rtol: relative rank tolerance (a Python or NumPy real ≥ 0, not a bool), or None for
      the default.

  Returns:
    Real array (min(k_A, k_B),) of the common dtype, ascending, in [0, π/2]; all NaN
    when an input has a NaN or infinite entry.

  Raises:
    ValueError: if an input is not a non-empty real matrix, their d differ, k > d, an
      input is half precision (float16, bfloat16), or rtol is negative.
  """
  a, b = _as_real_matrix(a, "a"), _as_real_matrix(b, "b")
  if a.shape[1] != b.shape[1]:
    raise ValueError(f"a and b must be (k_A, d) and (k_B, d) with the same d; got {a.shape=}, "
                     f"{b.shape=}.")
  for name, mat in (("a", a), ("b", b)):
    if mat.shape[0] > mat.shape[1]:
      raise ValueError(f"{name} has more rows than dimensions (a subspace of R^d has at most "
                       f"d): need k ≤ d; got {mat.shape=} (pass a basis of its row space).")
  rtol = algebra.check_finite_real(rtol, "rtol", allow_none=True)
  dtype = jnp.result_type(a.dtype, b.dtype)
  (qa, rank_a), (qb, rank_b) = (_row_space(m.astype(dtype), rtol) for m in (a, b))
  y, cos, zt = jnp.linalg.svd(mm(qa, jnp.matrix_transpose(qb)), full_matrices=False)
  u = mm(jnp.matrix_transpose(y), qa)                                    # (m, d)
  v = mm(zt, qb)                                                         # (m, d)
  cos = jnp.clip(cos, 0.0, 1.0)
  sin = jnp.clip(jnp.linalg.norm(v - cos[:, None] * u, axis=-1), 0.0, 1.0)
  theta = jnp.where(cos * cos >= 0.5, jnp.arcsin(sin), jnp.arccos(cos))
  valid = jnp.arange(cos.shape[0]) < jnp.minimum(rank_a, rank_b)
  theta = jnp.sort(jnp.where(valid, theta, jnp.asarray(jnp.pi / 2, dtype)))
  # A NaN or inf entry would count as rank 0 and read as π/2: NaN says so instead.
  finite = jnp.all(jnp.isfinite(a)) & jnp.all(jnp.isfinite(b))
  return jnp.where(finite, theta, jnp.asarray(jnp.nan, dtype))


def _float_dtype_of(x, y):
  """The common dtype of x and y: float/complex 32/64 bits (integers -> default float)."""
  for name, a in (("x", x), ("y", y)):  # each: float16 with float32 would promote silently
    if jnp.issubdtype(jnp.result_type(a), jnp.inexact):
      algebra.check_real_dtype(jnp.finfo(jnp.result_type(a)).dtype, f"{name}'s (real) dtype")
  dtype = jnp.result_type(x, y)
  return dtype if jnp.issubdtype(dtype, jnp.inexact) else jnp.result_type(float)


def procrustes_unitary(x, y) -> jax.Array:
  """The unitary U minimising Σ_i ‖U x_i - y_i‖² for pairs stacked as rows (closed form).

  Rows are the operators experiment's convention: y_PxN ≈ x_PxN @ Uᵀ. The loss is
  ‖X Uᵀ - Y‖²_F = ‖X‖² + ‖Y‖² - 2 Re tr(U Cᴴ) with C = Σ_i y_i x_iᴴ = Yᵀ conj(X) (N×N,
  y_i and x_i the rows as column vectors), so the minimiser maximises Re tr(U Cᴴ): it is
  the unitary polar factor of C, U = P Qᴴ for the SVD C = P Σ Qᴴ (orthogonal Procrustes,
  Schönemann 1966; `lie_unitary.polar_unitary`, which a caller accumulating C over many
  pairs calls itself). For noiseless y_i = U₀ x_i with X of rank N, C = U₀ (Xᵀ conj(X))
  with the second factor Hermitian positive definite, so U = U₀ exactly.

  If C is rank-deficient (e.g. fewer than N pairs) the minimiser is not unique and this
  returns one of them. Real x and y give the real orthogonal minimiser over O(N): its
  determinant may be -1 (no restriction to SO(N)). Not meant to be differentiated
  (SVD; no derivative at repeated singular values).

  Args:
    x: array (..., P, N), P ≥ 1 inputs as rows, real or complex (float32/64,
      complex64/128; integers are promoted to the default float).
    y: array (..., P, N) of the same shape, the outputs.

  Returns:
    Array (..., N, N): complex (complex64/128) if either input is complex, else real
    orthogonal (float32/64), the common precision of x and y.

  Raises:
    ValueError: if x and y differ in shape, have rank < 2 or an empty P or N axis, or
      are half precision (float16, bfloat16).
  """
  x, y = jnp.asarray(x), jnp.asarray(y)
  if x.shape != y.shape or x.ndim < 2 or 0 in x.shape[-2:]:
    raise ValueError(f"x and y must have the same shape (..., P, N), P, N ≥ 1 (pairs as "
                     f"rows); got {x.shape=}, {y.shape=}.")
  dtype = _float_dtype_of(x, y)
  x, y = x.astype(dtype), y.astype(dtype)
  # The polar factor of Σ_i y_i x_iᴴ (`parametrizations.polar_unitary`, the one SVD).
  return parametrizations.polar_unitary(mm(jnp.matrix_transpose(y), jnp.conj(x)))
