"""Rectangular matrices with orthonormal columns (Stiefel manifolds) from minimal coefficients.

The complex Stiefel manifold V_k(ℂⁿ) = {Q ∈ ℂ^{n×k} : QᴴQ = I_k} has real dimension
2nk − k², the real one V_k(ℝⁿ) = {Q ∈ ℝ^{n×k} : QᵀQ = I_k} has nk − k(k+1)/2. Both maps
here take exactly that many real coefficients and return the first k columns of a
matrix exponential, as the paper's U(λ) = expm(Σ λ_j T_j) (§2) does for k = n:

    Q = expm(K)[:, :k],   K = [[A, −Bᴴ],
                               [B,  0 ]],

A ∈ u(k) (so(k) for the real map) and B ∈ ℂ^{(n−k)×k} (ℝ^{(n−k)×k}). The n×n
skew-Hermitian K has a zero lower-right (n−k)×(n−k) block: the directions of u(n−k)
only rotate the discarded columns, so they are left out. At K = 0 the differential
λ ↦ [[A], [B]] is onto the tangent space of the manifold at E_k = I[:, :k].

Coefficient order (last axis of the input):

- complex, 2nk − k² reals: the k² u(k) coefficients of A in the order of
  `lambdas_to_skew_hermitian`, then Re B ((n−k)·k, row-major), then Im B (same).
- real, nk − k(k+1)/2 reals: the k(k−1)/2 so(k) coefficients of A in the order of
  `lambdas_to_skew_symmetric` (none for k = 1), then B ((n−k)·k, row-major).

For k = n, B is empty and the maps are exactly `unitary_from_lambdas` and
`orthogonal_from_lambdas` (same coefficients, same matrix). The exponential is
`expm_skew_hermitian` with its ``method`` ("auto" by default, which is "eigh" on CPU):
with "eigh" both derivative modes are its exact O(n³) spectral rule.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import algebra
from lie_unitary import expm

__all__ = [
    "num_semi_orthogonal_params",
    "num_semi_unitary_params",
    "semi_orthogonal_from_lambdas",
    "semi_unitary_from_lambdas",
]


def _check_sizes(n, k) -> tuple[int, int]:
  for name, value in (("n", n), ("k", k)):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
      raise ValueError(f"{name} must be an integer; got {value!r}.")
  if not 1 <= k <= n:
    raise ValueError(f"need 1 ≤ k ≤ n (k orthonormal columns of length n); got {n=}, {k=}.")
  return int(n), int(k)


def num_semi_unitary_params(n: int, k: int) -> int:
  """2nk − k², the real dimension of the complex Stiefel manifold V_k(ℂⁿ).

  Args:
    n: rows, an integer ≥ 1.
    k: orthonormal columns, an integer with 1 ≤ k ≤ n.

  Returns:
    The number of real coefficients `semi_unitary_from_lambdas` takes (n² for k = n).

  Raises:
    ValueError: if n or k is not an integer, or not 1 ≤ k ≤ n.
  """
  n, k = _check_sizes(n, k)
  return 2 * n * k - k * k


def num_semi_orthogonal_params(n: int, k: int) -> int:
  """nk − k(k+1)/2, the dimension of the real Stiefel manifold V_k(ℝⁿ).

  Args:
    n: rows, an integer ≥ 1.
    k: orthonormal columns, an integer with 1 ≤ k ≤ n.

  Returns:
    The number of real coefficients `semi_orthogonal_from_lambdas` takes
    (n(n−1)/2 for k = n, and also for k = n − 1).

  Raises:
    ValueError: if n or k is not an integer, or not 1 ≤ k ≤ n.
  """
  n, k = _check_sizes(n, k)
  return n * k - k * (k + 1) // 2


def _check_coefficients(lam, num: int, what: str, n: int, k: int) -> jax.Array:
  lam = jnp.asarray(lam)
  if lam.ndim < 1 or lam.shape[-1] != num:
    raise ValueError(
        f"{what} for {n=}, {k=} must have shape (..., {num}); got {lam.shape=}.")
  return algebra.as_real_coefficients(lam, what)


def _skew_from_blocks(a, b) -> jax.Array:
  """[[A, −Bᴴ], [B, 0]] from A (..., k, k) and B (..., n−k, k)."""
  m = b.shape[-2]
  zeros = jnp.zeros(b.shape[:-2] + (m, m), b.dtype)
  top = jnp.concatenate([a, -jnp.conj(jnp.matrix_transpose(b))], axis=-1)
  bottom = jnp.concatenate([b, zeros], axis=-1)
  return jnp.concatenate([top, bottom], axis=-2)


def semi_unitary_from_lambdas(lam, n: int, k: int, method: str = "auto") -> jax.Array:
  """Q(λ) = expm(K(λ))[:, :k], an n×k complex matrix with orthonormal columns.

  See the module docstring for K(λ) and the coefficient order. For k = n this is
  `unitary_from_lambdas(lam)`.

  Args:
    lam: real array (..., 2nk − k²) (see `num_semi_unitary_params`); leading axes are
      batch axes. float32 or float64 (integers are promoted).
    n: rows, an integer ≥ 1.
    k: orthonormal columns, 1 ≤ k ≤ n.
    method: "eigh", "pade" or "auto", as in `expm_skew_hermitian` (n×n matrices).

  Returns:
    Complex array (..., n, k) with QᴴQ = I_k: complex64 for float32 λ, complex128 for
    float64.

  Raises:
    ValueError: if n or k is not an integer or not 1 ≤ k ≤ n, if `lam` is complex or
      half precision (float16, bfloat16), if its last axis is not 2nk − k², or for an
      unknown method.
  """
  num = num_semi_unitary_params(n, k)
  n, k = int(n), int(k)
  lam = _check_coefficients(lam, num, "lam", n, k)
  expm.check_method(method)
  if k == n:
    return expm.unitary_from_lambdas(lam, method=method)
  m = (n - k) * k
  batch = lam.shape[:-1]
  a = algebra.lambdas_to_skew_hermitian(lam[..., :k * k])
  b_re = lam[..., k * k:k * k + m].reshape(batch + (n - k, k))
  b_im = lam[..., k * k + m:].reshape(batch + (n - k, k))
  skew = _skew_from_blocks(a, jax.lax.complex(b_re, b_im))
  return expm.expm_skew_hermitian(skew, method=method)[..., :, :k]


def semi_orthogonal_from_lambdas(mu, n: int, k: int, method: str = "auto") -> jax.Array:
  """Q(μ) = expm(K(μ))[:, :k], an n×k real matrix with orthonormal columns.

  See the module docstring for K(μ) and the coefficient order. For k = n ≥ 2 this is
  `orthogonal_from_lambdas(mu)`; for n = k = 1 it is [[1]] from zero coefficients.

  Args:
    mu: real array (..., nk − k(k+1)/2) (see `num_semi_orthogonal_params`); leading
      axes are batch axes. float32 or float64 (integers are promoted).
    n: rows, an integer ≥ 1.
    k: orthonormal columns, 1 ≤ k ≤ n.
    method: "eigh", "pade" or "auto", as in `expm_skew_hermitian` (n×n matrices).

  Returns:
    Real array (..., n, k) of μ's dtype with QᵀQ = I_k.

  Raises:
    ValueError: if n or k is not an integer or not 1 ≤ k ≤ n, if `mu` is complex or
      half precision (float16, bfloat16), if its last axis is not nk − k(k+1)/2, or for
      an unknown method.
  """
  num = num_semi_orthogonal_params(n, k)
  n, k = int(n), int(k)
  mu = _check_coefficients(mu, num, "mu", n, k)
  expm.check_method(method)
  batch = mu.shape[:-1]
  if k == n:
    if n == 1:
      return jnp.ones(batch + (1, 1), mu.dtype)
    return expm.orthogonal_from_lambdas(mu, method=method)
  num_a = k * (k - 1) // 2
  # so(1) = {0}: no coefficients, the 1×1 block is zero.
  a = (algebra.lambdas_to_skew_symmetric(mu[..., :num_a]) if k >= 2
       else jnp.zeros(batch + (1, 1), mu.dtype))
  b = mu[..., num_a:].reshape(batch + (n - k, k))
  skew = _skew_from_blocks(a, b)
  if method == "auto":
    # Not the real square rule: Padé on [[A, −Bᵀ], [B, 0]] (a large norm, many
    # squarings) was slower than eigh for the rectangular maps timed on CPU
    # (docs/benchmarks.md, "Choosing a backend").
    method = expm.choose_method(n, math.prod(batch) if batch else 1)
  return expm.expm_skew_symmetric(skew, method=method)[..., :, :k]
