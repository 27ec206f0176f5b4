"""The Lie algebras u(n) and so(n): bases, coefficients <-> matrices, change of basis.

Basis order (the contract of `basis(n)`, paper §2.2), for coefficients λ ∈ R^{n²}:

1. ``n`` diagonal imaginary elements: T = i·e_a e_aᵀ, a = 0..n-1.
2. ``n(n-1)/2`` symmetric imaginary elements: i at (r, s) and (s, r), r < s.
3. ``n(n-1)/2`` antisymmetric real elements: +1 at (r, s), -1 at (s, r), r < s.

Pairs (r, s) of blocks 2 and 3 run row-major over the strict upper triangle
(the order of `numpy.triu_indices(n, 1)`).

The original code (github.com/ratschlab/uRNN) ordered the same elements row-major
over the n×n grid instead, with the antisymmetric element's +1 in the LOWER
triangle; `lambdas_to_original_order` / `lambdas_from_original_order` convert.

so(n) coefficients μ ∈ R^{n(n-1)/2} are block 3 alone: real skew-symmetric matrices.

Building a matrix from coefficients is a gather into an n×n array (O(n²)); no dense
basis is ever summed except in `basis`, which exists for tests and small n.
"""

from __future__ import annotations

import functools
import math
import numbers

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "as_complex_square",
    "as_float_square",
    "as_real_coefficients",
    "as_square_matrix",
    "basis",
    "change_basis",
    "check_lambdas",
    "check_positive_int",
    "check_real_dtype",
    "complex_dtype",
    "complex_dtype_for",
    "cotangent_to_lambdas",
    "entry_positions",
    "lambdas_from_original_order",
    "lambdas_to_hermitian",
    "lambdas_to_original_order",
    "lambdas_to_skew_hermitian",
    "lambdas_to_skew_symmetric",
    "n_from_num_lambdas",
    "n_from_num_so_lambdas",
    "skew_hermitian_to_lambdas",
    "skew_symmetric_to_lambdas",
]


def _is_count(num) -> bool:  # a Python or NumPy integer, not a bool
  return isinstance(num, (int, np.integer)) and not isinstance(num, bool)


def n_from_num_lambdas(num: int) -> int:
  """Returns n such that n² == num.

  Raises:
    ValueError: if `num` is not the square of a positive integer.
  """
  if not _is_count(num) or num < 1 or math.isqrt(num) ** 2 != num:
    raise ValueError(
        f"a u(n) coefficient vector needs n² entries for an integer n ≥ 1; got "
        f"{num!r}, which is not a perfect square.")
  return math.isqrt(num)


def n_from_num_so_lambdas(num: int) -> int:
  """Returns n such that n(n-1)/2 == num (n ≥ 2).

  Raises:
    ValueError: if `num` is not a triangular number n(n-1)/2 with n ≥ 2.
  """
  n = (1 + math.isqrt(1 + 8 * num)) // 2 if _is_count(num) and num >= 0 else -1
  if n < 2 or n * (n - 1) // 2 != num:
    raise ValueError(
        f"an so(n) coefficient vector needs n(n-1)/2 entries for an integer "
        f"n ≥ 2; got {num!r}.")
  return n


def complex_dtype_for(real_dtype) -> jnp.dtype:
  """The complex dtype of the same precision: float32 -> complex64, float64 -> complex128."""
  return jnp.result_type(real_dtype, jnp.complex64)


_REAL_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def complex_dtype(dtype=None) -> np.dtype:
  """`dtype` as a NumPy dtype, if complex64 or complex128; None: the default complex
  (complex128 with x64 enabled, else complex64).

  Raises:
    ValueError: for any other dtype, or one `jnp.dtype` does not know.
  """
  try:
    dtype = jnp.dtype(dtype or jnp.result_type(complex))
  except TypeError as error:
    raise ValueError(f"dtype must be complex64 or complex128; got {dtype!r}.") from error
  if dtype not in (np.dtype(np.complex64), np.dtype(np.complex128)):
    raise ValueError(f"dtype must be complex64 or complex128; got {dtype}.")
  return dtype


def check_positive_int(value, what: str = "n") -> int:
  """`value` as a Python int, if it is an integer ≥ 1 (a Python or NumPy integer; not a bool).

  Args:
    value: the size to check.
    what: its name, for the error message.

  Raises:
    ValueError: if `value` is not an integer ≥ 1 (a float, a bool, 0 or negative).
  """
  if not _is_count(value) or value < 1:
    raise ValueError(f"{what} must be a positive integer; got {value!r}.")
  return int(value)


def check_finite_real(value, what: str, *, positive: bool = False,
                      allow_none: bool = False) -> float | None:
  """`value` as a Python float, if it is a finite real ≥ 0 (> 0 with `positive`).

  A Python or NumPy real; not a bool, a string or an array.

  Args:
    value: the number to check.
    what: its name, for the error message.
    positive: refuse 0 as well.
    allow_none: return None for None.

  Raises:
    ValueError: if `value` is not such a number (or None where allowed).
  """
  if allow_none and value is None:
    return None
  if not (isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
          and math.isfinite(value) and (value > 0 if positive else value >= 0)):
    bound = "> 0" if positive else "≥ 0"
    raise ValueError(f"{what} must be a finite float {bound}{' or None' if allow_none else ''}; "
                     f"got {value!r}.")
  return float(value)


def check_real_dtype(dtype, what: str = "dtype") -> np.dtype:
  """`dtype` as a NumPy dtype, if it is one of the two this library computes in.

  Those are float32 and float64, whose complex counterparts (complex64, complex128)
  U(λ) takes. Half precision (float16, bfloat16) has no complex dtype in XLA and no
  eigh, so it is refused rather than computed in float32 behind the caller's back.

  Args:
    dtype: anything `jnp.dtype` accepts.
    what: the name of what has this dtype, for the error message.

  Returns:
    float32 or float64.

  Raises:
    ValueError: naming `what` and the dtype, for any dtype but float32 and float64
      (half precision, integers, complex, ...) or one `jnp.dtype` does not know.
  """
  try:
    dtype = jnp.dtype(dtype)
  except TypeError as error:
    raise ValueError(f"{what} must be float32 or float64; got {dtype!r}.") from error
  if dtype not in _REAL_DTYPES:
    hint = (" Half precision is not supported: compute in float32 (cast the input, or "
            "give a layer param_dtype=jnp.float32) and cast the result if needed."
            if jnp.issubdtype(dtype, jnp.floating) else "")
    raise ValueError(f"{what} must be float32 or float64; got {dtype}.{hint}")
  return dtype


def as_real_coefficients(coefficients, what: str = "lam") -> jax.Array:
  """Real coefficients of rank ≥ 1 as a JAX array: the input check of every coefficient map.

  The maps of u(n), so(n) and su(n) coefficients and the Stiefel maps all check their
  coefficients here, so they accept and reject the same dtypes.

  Args:
    coefficients: array-like (..., num_coefficients), float32 or float64; integers
      (and booleans) are promoted to the default float.
    what: the argument's name, for the error messages.

  Returns:
    `coefficients` as a float32 or float64 JAX array of the same shape.

  Raises:
    ValueError: naming `what`, if `coefficients` is complex, a scalar, or of a floating
      dtype other than float32 and float64 (float16, bfloat16: `check_real_dtype`).
  """
  lam = jnp.asarray(coefficients)
  if jnp.iscomplexobj(lam):
    raise ValueError(
        f"{what} must be REAL coefficients; got dtype {lam.dtype}. "
        "JAX's gradient with respect to a complex parameter x + iy is "
        "dC/dx - i dC/dy, which optax applies as is, ascending in y: store "
        "real and imaginary parts as separate real arrays.")
  if lam.ndim < 1:
    raise ValueError(f"{what} must have rank ≥ 1 (..., num_coefficients); got {lam.shape=}.")
  if jnp.issubdtype(lam.dtype, jnp.floating):
    check_real_dtype(lam.dtype, f"{what}'s dtype")
  else:
    lam = lam.astype(jnp.result_type(float))
  return lam


def _broadcast_to_batch(table, batch_ndim: int) -> jax.Array:
  """A static table with leading unit axes, so batch broadcasting is explicit."""
  return jnp.asarray(table).reshape((1,) * batch_ndim + np.shape(table))


def as_square_matrix(mat, what: str) -> jax.Array:
  """`mat` as a JAX array, checked to be a (batch of) square matrices (..., n, n).

  Args:
    mat: array-like of any dtype.
    what: the argument's name, for the error message.

  Returns:
    `mat` as a JAX array, its shape and dtype unchanged.

  Raises:
    ValueError: naming `what`, if `mat` has rank < 2 or unequal last two axes.
  """
  mat = jnp.asarray(mat)
  if mat.ndim < 2 or mat.shape[-1] != mat.shape[-2]:
    raise ValueError(f"{what} must be square with shape (..., n, n); got {mat.shape=}.")
  return mat


def as_float_square(mat, what: str) -> jax.Array:
  """`as_square_matrix`, then integers and bools as the default float; half precision refused.

  Args:
    mat: array-like (..., n, n), real or complex.
    what: the argument's name, for the error message.

  Returns:
    `mat` as a JAX array of float32/float64 or complex64/complex128, its shape unchanged.

  Raises:
    ValueError: naming `what`, if `mat` is not square or is float16 / bfloat16.
  """
  mat = as_square_matrix(mat, what)
  if not jnp.issubdtype(mat.dtype, jnp.inexact):
    return mat.astype(jnp.result_type(float))
  if not jnp.iscomplexobj(mat):
    check_real_dtype(mat.dtype, f"{what}'s dtype")
  return mat


def as_complex_square(mat, what: str) -> jax.Array:
  """Checks that `mat` is (..., n, n) and promotes it to the complex dtype of its precision.

  Args:
    mat: array-like (..., n, n): complex, or real (integers become the default float).
    what: the argument's name, for the error message.

  Returns:
    Complex array (..., n, n): complex64 for float32 or complex64 input, complex128 for
    float64 or complex128.

  Raises:
    ValueError: naming `what`, if `mat` is not square or is half precision (float16,
      bfloat16: no complex dtype of that precision).
  """
  mat = as_float_square(mat, what)
  return mat if jnp.iscomplexobj(mat) else mat.astype(complex_dtype_for(mat.dtype))


@functools.lru_cache(maxsize=None)
def _gather_tables(n: int):
  """Static index tables for u(n): where each matrix entry reads its coefficient.

  Returns (re_idx, re_sign, im_idx, upper_rows, upper_cols). Index n² points at an
  appended zero, so Re L = re_sign * λ̂[re_idx] and Im L = λ̂[im_idx] with λ̂ = [λ, 0].
  """
  # int32: these cached arrays are reused across calls, and JAX (0.10) remembers a
  # NumPy index array's int64 conversion from a trace under x64, which then fails an
  # eager gather after x64 is switched off.
  rows, cols = (a.astype(np.int32) for a in np.triu_indices(n, 1))
  m = rows.size
  zero = n * n
  re_idx = np.full((n, n), zero, np.int32)
  re_sign = np.zeros((n, n), np.float64)
  im_idx = np.full((n, n), zero, np.int32)
  im_idx[np.arange(n), np.arange(n)] = np.arange(n)
  sym = n + np.arange(m)
  anti = n + m + np.arange(m)
  im_idx[rows, cols] = sym
  im_idx[cols, rows] = sym
  re_idx[rows, cols] = anti
  re_idx[cols, rows] = anti
  re_sign[rows, cols] = 1.0
  re_sign[cols, rows] = -1.0
  return re_idx, re_sign, im_idx, rows, cols


@functools.lru_cache(maxsize=None)
def entry_positions(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Where the basis elements sit in an n×n matrix flattened row-major (n² entries).

  Args:
    n: matrix size, an integer ≥ 1.

  Returns:
    ``(diagonal, upper, lower)``, read-only int32 NumPy arrays of flat indices: a·(n+1)
    of the n diagonal entries (a, a); r·n + s of the upper entries (r, s) and s·n + r
    of the lower entries (s, r), n(n-1)/2 each, for the pairs r < s in the order of
    `numpy.triu_indices(n, 1)` (blocks 2 and 3 of the module docstring).

  Raises:
    ValueError: if n is not a positive integer.
  """
  n = check_positive_int(n)
  rows, cols = np.triu_indices(n, 1)
  positions = tuple(p.astype(np.int32) for p in (np.arange(n) * (n + 1), rows * n + cols,
                                                  cols * n + rows))
  for p in positions:
    p.flags.writeable = False  # shared by every caller through the cache
  return positions


def check_lambdas(lam) -> jax.Array:
  """Validates u(n) coefficients: real, rank ≥ 1, a perfect-square last axis.

  Returns:
    `lam` as a float32 or float64 array (integers promoted to the default float).

  Raises:
    ValueError: if `lam` is complex, a scalar, half precision (float16, bfloat16) or
      another dtype but float32/float64 and integers, or its last axis is not a
      perfect square.
  """
  lam = as_real_coefficients(lam, "lam")
  n_from_num_lambdas(lam.shape[-1])
  return lam


def cotangent_to_lambdas(cotangent) -> jax.Array:
  """λ̄_j = Re Σ_ab Ḡ_ab (T_j)_ab: pulls a cotangent of L back to the coefficients.

  This is the transpose of `lambdas_to_skew_hermitian` under JAX's convention for
  complex cotangents (Ḡ = ∂C/∂Re L - i ∂C/∂Im L), written as gathers so the
  reverse pass needs no scatter. Only the skew-Hermitian part of Ḡ contributes.

  Args:
    cotangent: complex array (..., n, n).

  Returns:
    Real array (..., n²).
  """
  n = cotangent.shape[-1]
  on_diagonal, upper_positions, lower_positions = entry_positions(n)
  flat = cotangent.reshape(cotangent.shape[:-2] + (n * n,))
  upper, lower = flat[..., upper_positions], flat[..., lower_positions]
  diag = -jnp.imag(flat[..., on_diagonal])
  sym = -jnp.imag(upper + lower)
  anti = jnp.real(upper - lower)
  return jnp.concatenate([diag, sym, anti], axis=-1)


def _real_and_imaginary_parts(lam):
  """Re L(λ), Im L(λ) by two gathers from [λ, 0] (O(n²), no dense basis)."""
  lam = as_real_coefficients(lam, "lam")
  n = n_from_num_lambdas(lam.shape[-1])
  re_idx, re_sign, im_idx, _, _ = _gather_tables(n)
  padded = jnp.concatenate([lam, jnp.zeros(lam.shape[:-1] + (1,), lam.dtype)], axis=-1)
  re = padded[..., re_idx] * _broadcast_to_batch(re_sign.astype(lam.dtype), lam.ndim - 1)
  return re, padded[..., im_idx]


def lambdas_to_skew_hermitian(lam) -> jax.Array:
  """L(λ) = Σ_j λ_j T_j, the skew-Hermitian matrix with coefficients λ.

  Args:
    lam: real array (..., n²), float32 or float64 (integers are promoted).

  Returns:
    Complex array (..., n, n): complex64 for float32 input, complex128 for float64.

  Raises:
    ValueError: as `check_lambdas` (complex, scalar, half-precision λ or a last axis
      that is not a perfect square).
  """
  return jax.lax.complex(*_real_and_imaginary_parts(lam))


def lambdas_to_hermitian(lam) -> jax.Array:
  """i·L(λ), the Hermitian matrix whose eigh gives the spectrum of L(λ) (no extra pass).

  Args:
    lam: real array (..., n²), float32 or float64 (integers are promoted).

  Returns:
    Complex array (..., n, n), Hermitian: Re = -Im L, Im = Re L.

  Raises:
    ValueError: as `lambdas_to_skew_hermitian`.
  """
  re, im = _real_and_imaginary_parts(lam)
  return jax.lax.complex(-im, re)


def skew_hermitian_to_lambdas(skew) -> jax.Array:
  """Coefficients λ of the skew-Hermitian part (L - Lᴴ)/2 of a square matrix.

  For skew-Hermitian L this inverts `lambdas_to_skew_hermitian` exactly; for any
  other L it returns the coefficients of its orthogonal projection onto u(n)
  (the Hermitian part is discarded).

  Args:
    skew: array (..., n, n), complex (a real input is read as a real matrix).

  Returns:
    Real array (..., n²) of the matching precision (complex64 -> float32).

  Raises:
    ValueError: if `skew` is not square, or half precision (float16, bfloat16).
  """
  skew = as_float_square(skew, "skew")  # integers and bools: the default float
  n = skew.shape[-1]
  _, _, _, rows, cols = _gather_tables(n)
  re, im = jnp.real(skew), jnp.imag(skew)
  diag = jnp.diagonal(im, axis1=-2, axis2=-1)
  sym = 0.5 * (im[..., rows, cols] + im[..., cols, rows])
  anti = 0.5 * (re[..., rows, cols] - re[..., cols, rows])
  return jnp.concatenate([diag, sym, anti], axis=-1)


def lambdas_to_skew_symmetric(mu) -> jax.Array:
  """A(μ): the real skew-symmetric matrix with so(n) coefficients μ.

  The entry for pair r < s (row-major over the strict upper triangle) is +μ at
  (r, s) and -μ at (s, r): block 3 of the u(n) basis.

  Args:
    mu: real array (..., n(n-1)/2), float32 or float64 (integers are promoted).

  Returns:
    Real array (..., n, n) of the same dtype.

  Raises:
    ValueError: if `mu` is complex, a scalar, half precision (float16, bfloat16), or
      its length is not n(n-1)/2.
  """
  mu = as_real_coefficients(mu, "mu")
  n = n_from_num_so_lambdas(mu.shape[-1])
  rows, cols = np.triu_indices(n, 1)
  idx = np.full((n, n), rows.size, np.int32)
  idx[rows, cols] = np.arange(rows.size)
  idx[cols, rows] = np.arange(rows.size)
  sign = np.zeros((n, n))
  sign[rows, cols] = 1.0
  sign[cols, rows] = -1.0
  padded = jnp.concatenate([mu, jnp.zeros(mu.shape[:-1] + (1,), mu.dtype)], axis=-1)
  return padded[..., idx] * _broadcast_to_batch(sign.astype(mu.dtype), mu.ndim - 1)


def skew_symmetric_to_lambdas(skew) -> jax.Array:
  """so(n) coefficients of the skew-symmetric part (A - Aᵀ)/2 of a real matrix.

  Args:
    skew: real array (..., n, n).

  Returns:
    Real array (..., n(n-1)/2).

  Raises:
    ValueError: if `skew` is not square, is complex or half precision, or n < 2.
  """
  skew = as_square_matrix(skew, "skew")
  if jnp.iscomplexobj(skew):
    raise ValueError(f"skew must be a real matrix for so(n); got dtype {skew.dtype}.")
  skew = as_float_square(skew, "skew")  # integers and bools: the default float
  n = skew.shape[-1]
  if n < 2:
    raise ValueError(f"so(n) needs n ≥ 2; got {skew.shape=}.")
  rows, cols = np.triu_indices(n, 1)
  return 0.5 * (skew[..., rows, cols] - skew[..., cols, rows])


def basis(n: int, dtype=None) -> jax.Array:
  """The dense basis T_1..T_{n²} of u(n), in the paper's order (module docstring).

  Built entry by entry, independently of `lambdas_to_skew_hermitian`, so tests can
  compare the two. Memory is O(n⁴): for tests and small n only.

  Args:
    n: matrix size, an integer ≥ 1.
    dtype: complex dtype of the result; default complex128 if x64 is enabled,
      else complex64.

  Returns:
    Complex array (n², n, n); element j is T_{j+1}.

  Raises:
    ValueError: if n is not a positive integer, or `dtype` is not complex64 or
      complex128 (a real dtype would drop the imaginary entries).
  """
  n = check_positive_int(n)
  dtype = complex_dtype(dtype)
  out = np.zeros((n * n, n, n), np.complex128)
  for a in range(n):
    out[a, a, a] = 1j
  j = n
  for r in range(n):
    for s in range(r + 1, n):
      out[j, r, s] = out[j, s, r] = 1j
      j += 1
  for r in range(n):
    for s in range(r + 1, n):
      out[j, r, s], out[j, s, r] = 1.0, -1.0
      j += 1
  return jnp.asarray(out, dtype=dtype)


@functools.lru_cache(maxsize=None)
def _original_order_tables(n: int):
  """perm, sign with λ_ours = sign * λ_orig[perm]."""
  # The original code's element e is (e // n, e % n): the diagonal one at e = a·n + a,
  # the symmetric imaginary one at (r, s), i < j, and the antisymmetric real one with
  # its +1 at (s, r), i > j, the lower triangle: our three blocks' flat positions.
  perm = np.concatenate(entry_positions(n))
  sign = np.ones(n * n)
  sign[n + n * (n - 1) // 2:] = -1.0      # +1 lower vs our +1 upper
  return perm, sign


def lambdas_from_original_order(lam_orig) -> jax.Array:
  """Converts coefficients from the original code's row-major order to ours.

  The original code indexes e ↦ (i, j) = (e // n, e % n): the diagonal element for
  i = j, the symmetric imaginary one for i < j, and for i > j the antisymmetric real
  one with +1 at (i, j) in the LOWER triangle. That is a permutation of our basis
  with the antisymmetric block negated, so the conversion is a gather and a sign flip.

  Args:
    lam_orig: real array (..., n²) in the original order.

  Returns:
    Real array (..., n²) in this library's order, the same dtype.

  Raises:
    ValueError: as `lambdas_to_skew_hermitian`.
  """
  lam_orig = as_real_coefficients(lam_orig, "lam_orig")
  perm, sign = _original_order_tables(n_from_num_lambdas(lam_orig.shape[-1]))
  return lam_orig[..., perm] * _broadcast_to_batch(sign.astype(lam_orig.dtype), lam_orig.ndim - 1)


def lambdas_to_original_order(lam) -> jax.Array:
  """The inverse of `lambdas_from_original_order`: our order -> the original code's.

  Args:
    lam: real array (..., n²) in this library's order.

  Returns:
    Real array (..., n²) in the original code's row-major order.

  Raises:
    ValueError: as `lambdas_to_skew_hermitian`.
  """
  lam = as_real_coefficients(lam, "lam")
  perm, sign = _original_order_tables(n_from_num_lambdas(lam.shape[-1]))
  inverse = np.argsort(perm)
  return (lam * _broadcast_to_batch(sign.astype(lam.dtype), lam.ndim - 1))[..., inverse]


def change_basis(lam_tilde, change) -> jax.Array:
  """Coefficients in the standard basis from coefficients λ̃ in a new basis (appendix B).

  A new basis V_j = Σ_k M_jk T_k has coefficients λ̃; in the standard basis they are
  λ = λ̃ᵀ M, i.e. λ_b = Σ_k λ̃_k M_kb.

  Args:
    lam_tilde: real array (..., d), the coefficients in the new basis.
    change: real array (d, d), the change-of-basis matrix M (should be invertible).

  Returns:
    Real array (..., d), the standard-basis coefficients.

  Raises:
    ValueError: if shapes do not match, either input is complex, or `lam_tilde` is half
      precision (float16, bfloat16).
  """
  lam_tilde = as_real_coefficients(lam_tilde, "lam_tilde")
  change = jnp.asarray(change)
  if jnp.iscomplexobj(change):
    raise ValueError(f"change must be a real matrix; got dtype {change.dtype}.")
  d = lam_tilde.shape[-1]
  if change.shape != (d, d):
    raise ValueError(
        f"change must have shape (d, d) = ({d}, {d}) to match lam_tilde; got {change.shape=}.")
  return lam_tilde @ change.astype(lam_tilde.dtype)
