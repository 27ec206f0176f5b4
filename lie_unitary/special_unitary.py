"""The special unitary group SU(n) through its Lie algebra su(n) (paper §2.2 restricted).

su(n) is the traceless part of u(n), of dimension n² - 1; expm maps it onto SU(n),
the unitary matrices with determinant 1 (det expm(L) = e^{tr L} = 1).

Basis order (the contract of `su_basis(n)`), for coefficients μ ∈ R^{n²-1}:

1. ``n - 1`` diagonal elements, the generalised Gell-Mann diagonal matrices
   D_k = i·diag(1, …, 1, -k, 0, …, 0) / √(k(k+1)), k = 1..n-1 (k ones, then -k at
   index k). Each has Frobenius norm 1, like the diagonal elements i·e_a e_aᵀ of u(n).
2. ``n(n-1)/2`` symmetric imaginary and 3. ``n(n-1)/2`` antisymmetric real elements:
   the off-diagonal elements of u(n) exactly as `lie_unitary.algebra.basis(n)` orders
   them (blocks 2 and 3 there), each of Frobenius norm √2.

The basis is orthogonal under the trace inner product ⟨A, B⟩ = Re tr(Aᴴ B): the D_k
are orthonormal and orthogonal to the identity, and the off-diagonal elements are
orthogonal to every diagonal matrix. So μ is read off a traceless L by inner products,
and reading it off any square matrix gives its orthogonal projection onto su(n).

Building L(μ) is a cumulative sum over the n - 1 diagonal coefficients and the gather
of `lie_unitary.algebra` (O(n²)); no dense basis is summed except in `su_basis`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import algebra
from lie_unitary import expm
from lie_unitary import logm

__all__ = [
    "check_su_lambdas",
    "n_from_num_su_lambdas",
    "skew_hermitian_to_su_lambdas",
    "special_unitary_from_lambdas",
    "su_basis",
    "su_lambdas_from_special_unitary",
    "su_lambdas_to_skew_hermitian",
]


def n_from_num_su_lambdas(num: int) -> int:
  """Returns n such that n² - 1 == num (n ≥ 2).

  Raises:
    ValueError: if `num` is not n² - 1 for an integer n ≥ 2.
  """
  n = math.isqrt(num + 1) if algebra._is_count(num) and num >= 0 else -1
  if n < 2 or n * n - 1 != num:  # n = -1 for a non-count: never compared with num
    raise ValueError(
        f"an su(n) coefficient vector needs n² - 1 entries for an integer n ≥ 2 "
        f"(3, 8, 15, 24, ...); got {num!r}.")
  return n


def check_su_lambdas(mu) -> jax.Array:
  """Validates su(n) coefficients: real, rank ≥ 1, a last axis of length n² - 1, n ≥ 2.

  Returns:
    `mu` as a float32 or float64 array (integers promoted to the default float).

  Raises:
    ValueError: if `mu` is complex, a scalar, half precision (float16, bfloat16), or
      its last axis is not n² - 1.
  """
  mu = algebra.as_real_coefficients(mu, "mu")
  n_from_num_su_lambdas(mu.shape[-1])
  return mu


def _gell_mann_tables(n: int, batch_ndim: int, dtype) -> tuple[jax.Array, jax.Array]:
  """k and 1/√(k(k+1)) for k = 1..n-1 (the normalisation of D_k), with batch axes."""
  k = np.arange(1, n, dtype=np.float64)
  shape = (1,) * batch_ndim + (n - 1,)
  return (jnp.asarray(k.reshape(shape), dtype),
          jnp.asarray((1.0 / np.sqrt(k * (k + 1))).reshape(shape), dtype))


def _diagonal_from_gell_mann(mu_diag, n: int) -> jax.Array:
  """Im of the diagonal of Σ_k μ_k D_k, as u(n) diagonal coefficients (..., n).

  Entry a collects +c_k from every D_k with k > a and -k·c_k from D_a itself, where
  c_k = μ_k/√(k(k+1)): a reversed cumulative sum, O(n).
  """
  k, scale = _gell_mann_tables(n, mu_diag.ndim - 1, mu_diag.dtype)
  c = mu_diag * scale                                            # c_1..c_{n-1}
  later = jnp.flip(jnp.cumsum(jnp.flip(c, -1), axis=-1), -1)     # Σ_{k ≥ j} c_k, j = 1..n-1
  zero = jnp.zeros(c.shape[:-1] + (1,), c.dtype)
  above = jnp.concatenate([later, zero], axis=-1)                # a = 0..n-1: Σ_{k > a} c_k
  own = jnp.concatenate([zero, c * k], axis=-1)                  # a·c_a
  return above - own


def _gell_mann_from_diagonal(h, n: int) -> jax.Array:
  """μ_k = ⟨D_k, i·diag(h)⟩ = (Σ_{a<k} h_a - k·h_k)/√(k(k+1)), k = 1..n-1; O(n)."""
  before = jnp.cumsum(h, axis=-1)[..., :-1]                      # Σ_{a<k} h_a, k = 1..n-1
  k, scale = _gell_mann_tables(n, h.ndim - 1, h.dtype)
  return (before - k * h[..., 1:]) * scale


def _su_to_u_lambdas(mu) -> jax.Array:
  """The u(n) coefficients λ of L(μ): the same matrix in the basis of `algebra.basis`."""
  mu = check_su_lambdas(mu)
  n = n_from_num_su_lambdas(mu.shape[-1])
  return jnp.concatenate([_diagonal_from_gell_mann(mu[..., :n - 1], n), mu[..., n - 1:]],
                         axis=-1)


def su_lambdas_to_skew_hermitian(mu) -> jax.Array:
  """L(μ) = Σ_j μ_j S_j, the traceless skew-Hermitian matrix with coefficients μ.

  Args:
    mu: real array (..., n² - 1), n ≥ 2, float32 or float64 (integers are promoted).

  Returns:
    Complex array (..., n, n), traceless: complex64 for float32, complex128 for float64.

  Raises:
    ValueError: if `mu` is complex, a scalar, half precision (float16, bfloat16), or
      its last axis is not n² - 1 for n ≥ 2.
  """
  return algebra.lambdas_to_skew_hermitian(_su_to_u_lambdas(mu))


def skew_hermitian_to_su_lambdas(skew) -> jax.Array:
  """Coefficients μ of the orthogonal projection of a square matrix onto su(n).

  The projection keeps the skew-Hermitian part (L - Lᴴ)/2 and removes its trace
  (tr(L)/n · I); for traceless skew-Hermitian L it inverts
  `su_lambdas_to_skew_hermitian` exactly.

  Args:
    skew: array (..., n, n), n ≥ 2, complex (a real input is read as a real matrix).

  Returns:
    Real array (..., n² - 1) of the matching precision (complex64 -> float32).

  Raises:
    ValueError: if `skew` is not square, half precision (float16, bfloat16) or n < 2.
  """
  skew = jnp.asarray(skew)
  if skew.ndim < 2 or skew.shape[-1] != skew.shape[-2] or skew.shape[-1] < 2:
    raise ValueError(f"skew must be square with shape (..., n, n), n ≥ 2; got {skew.shape=}.")
  n = skew.shape[-1]
  lam = algebra.skew_hermitian_to_lambdas(skew)
  # The D_k are orthogonal to the identity, so reading them discards the trace.
  return jnp.concatenate([_gell_mann_from_diagonal(lam[..., :n], n), lam[..., n:]], axis=-1)


def special_unitary_from_lambdas(mu, method: str = "auto") -> jax.Array:
  """U(μ) = expm(Σ_j μ_j S_j) ∈ SU(n).

  L(μ) is a u(n) matrix whose coefficients λ(μ) are linear in μ (a cumulative sum for
  the diagonal, the off-diagonal ones as they are), so U(μ) is
  `lie_unitary.expm.unitary_from_lambdas(λ(μ))`: with method "eigh" one eigh and the
  exact O(n³) spectral derivative in both modes (`grad`, `jvp`), whose reverse pass
  reads λ̄ with gathers; the chain through λ(μ) adds O(n²).

  Args:
    mu: real array (..., n² - 1) of su(n) coefficients in the order of `su_basis(n)`,
      float32 or float64 (integers are promoted).
    method: "eigh", "pade", "taylor" or "auto", as in `lie_unitary.expm.expm_skew_hermitian`.

  Returns:
    Complex array (..., n, n), unitary with determinant 1 (to rounding); complex64 for
    float32 μ, complex128 for float64.

  Raises:
    ValueError: if `mu` is complex, a scalar, half precision (float16, bfloat16), or
      its last axis is not n² - 1 for n ≥ 2, or `method` is not one of
      `lie_unitary.expm.METHODS`.
  """
  return expm.unitary_from_lambdas(_su_to_u_lambdas(mu), method)


def su_lambdas_from_special_unitary(u) -> jax.Array:
  """Coefficients μ of a traceless log of U ∈ SU(n): `special_unitary_from_lambdas(μ) ≈ U`.

  The principal logarithm (eigenphases φ_j in (-π, π]) need not be traceless: for
  det U = 1 the phases sum to 2πm for an integer m with |m| ≤ n/2, e.g. m = 1 for
  U = diag(e^{iθ}, e^{iθ}, e^{-2iθ}) with π/2 < θ < π (phases θ, θ, 2π - 2θ). Moving
  |m| phases by ∓2π makes the logarithm traceless; every such choice is equally far
  (2π√|m| in Frobenius norm) from the principal logarithm, and this function moves the
  m LARGEST phases down by 2π (m > 0) or the |m| SMALLEST up by 2π (m < 0). Of all
  traceless logarithms with eigenvalues i(φ_j + 2πk_j), k_j integers, that is one of
  smallest Frobenius norm. For m = 0 (e.g. U near the identity) it is the principal
  logarithm.

  For a unitary U with det U = e^{iα} ≠ 1 the remaining trace iα is projected away,
  giving coefficients of e^{-iα/n}·U (m is rounded to the nearest integer).

  Args:
    u: complex array (..., n, n), n ≥ 2, special unitary (a real matrix is promoted).

  Returns:
    Real array (..., n² - 1), float32 for complex64 input, float64 for complex128.

  Raises:
    ValueError: if `u` is not square, half precision (float16, bfloat16) or n < 2.

  Not meant to be differentiated; eigenvalues at exactly -1 sit on the branch cut.
  """
  u = algebra.as_complex_square(u, "u")
  n = u.shape[-1]
  if n < 2:
    raise ValueError(f"u must be (..., n, n) with n ≥ 2 for SU(n); got {u.shape=}.")
  phases, w = logm.unitary_eigendecomposition(u)
  two_pi = jnp.asarray(2 * np.pi, phases.dtype)
  m = jnp.round(jnp.sum(phases, axis=-1, keepdims=True) / two_pi)
  rank = jnp.argsort(jnp.argsort(phases, axis=-1), axis=-1)     # 0 = smallest phase
  down = (m > 0) & (rank >= n - m)                               # the m largest
  up = (m < 0) & (rank < -m)                                     # the |m| smallest
  phases = phases - two_pi * down.astype(phases.dtype) + two_pi * up.astype(phases.dtype)
  return skew_hermitian_to_su_lambdas(logm.log_from_eigendecomposition(phases, w))


def su_basis(n: int, dtype=None) -> jax.Array:
  """The dense basis S_1..S_{n²-1} of su(n), in the order of the module docstring.

  Built entry by entry, independently of `su_lambdas_to_skew_hermitian`, so tests can
  compare the two. Memory is O(n⁴): for tests and small n only.

  Args:
    n: matrix size, an integer ≥ 2.
    dtype: complex dtype of the result; default complex128 if x64 is enabled,
      else complex64.

  Returns:
    Complex array (n² - 1, n, n); element j is S_{j+1}.

  Raises:
    ValueError: if n is not an integer ≥ 2, or `dtype` is not complex64 or complex128.
  """
  if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
    raise ValueError(f"su(n) needs an integer n ≥ 2; got {n!r}.")
  diagonal = np.zeros((n - 1, n, n), np.complex128)
  for k in range(1, n):
    scale = 1.0 / math.sqrt(k * (k + 1))
    for a in range(k):
      diagonal[k - 1, a, a] = 1j * scale
    diagonal[k - 1, k, k] = -1j * k * scale
  # Blocks 2 and 3 are u(n)'s off-diagonal elements, built entry by entry there.
  off_diagonal = algebra.basis(n, dtype)[n:]  # checks dtype first
  return jnp.concatenate([jnp.asarray(diagonal, off_diagonal.dtype), off_diagonal])
