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
`orthogonal_from_lambdas` (same coefficients, same matrix).

Thin maps (2k < n): no n×n matrix. K maps the space spanned by E_k and the columns
of B into itself and vanishes on its orthogonal complement, and on that space it acts
through C = BᴴB alone: for Q(t) = expm(tK)[:, :k] = [X(t); B Z(t)] with X, Z k×k,

    K [X; B Z] = [A X − C Z; B X],  so  X' = A X − C Z,  Z' = X,  X(0) = I, Z(0) = 0.

For any invertible k×k T, Y = T Z turns this into one 2k×2k exponential,

    [X; Y] = expm(M)[:, :k],  M = [[A, −C T⁻¹], [T, 0]],  Q = [X; (B T⁻¹) Y].

Q does not depend on T (M changes by a similarity), so T is a constant for the
derivative (`jax.lax.stop_gradient`) and only sets the conditioning. With
eigh(C) = V diag(σ²) Vᴴ (σ: B's singular values; V also a constant) the map works in
V's coordinates (A → VᴴAV, B → BV, Q → Q V back), where T = diag(τ), τ = √(σ² + 1), is
inverted exactly: M's 2×2 blocks [[0, −σ²/τ], [τ, 0]] are nearly skew where σ is large,
and every entry of expm(M) and of B T⁻¹ (norm < 1) stays bounded where σ is small or
zero. C T⁻¹ is formed as Bᴴ(B T⁻¹) (rounding ε‖B‖, not the ε‖B‖² of C). What remains
is smooth in (A, B): products and the Padé exponential of M (`_expm_scaled`). JAX
differentiates it in both modes; no factorization of B is differentiated, so
derivatives are exact and finite at B = 0 and at rank-deficient B, where a thin QR's
or an eigendecomposition's own derivative is not defined. Cost: O(nk²) time (four n×k
by k×k products) and O(nk) memory, plus O(k³) for eigh(C) and expm(M).

For 2k ≥ n the subspace is as large as the whole space and the n×n exponential is
used: `expm_skew_hermitian` with ``method`` ("auto": eigh on CPU), whose derivative in
both modes is its exact O(n³) spectral rule. ``thin`` forces either path (the same Q
to rounding).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import algebra
from lie_unitary import expm
from lie_unitary.precision import matmul as mm

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
        f"{what} for {n=}, {k=} must have shape (..., {num}); got shape {lam.shape}.")
  return algebra.as_real_coefficients(lam, what)


def _skew_from_blocks(a, b) -> jax.Array:
  """[[A, −Bᴴ], [B, 0]] from A (..., k, k) and B (..., n−k, k)."""
  m = b.shape[-2]
  zeros = jnp.zeros(b.shape[:-2] + (m, m), b.dtype)
  top = jnp.concatenate([a, -jnp.conj(jnp.matrix_transpose(b))], axis=-1)
  bottom = jnp.concatenate([b, zeros], axis=-1)
  return jnp.concatenate([top, bottom], axis=-2)


def _check_thin(thin, n: int, k: int) -> bool:
  """Whether to take the thin path: ``thin`` if given (bool), else 2k < n."""
  if thin is None:
    return 2 * k < n
  if not isinstance(thin, bool):
    raise ValueError(f"thin must be None, True or False; got {thin!r}.")
  return thin and k < n


# Padé degree-13 (float64) and degree-7 (float32) bounds on the 1-norm (Higham 2005).
_PADE_THETA = {8: 5.371920351148152, 4: 3.925724783138660}
_MAX_SQUARINGS = 32  # ‖M‖₁ up to θ·2³²; beyond, NaN (as jax.scipy.linalg.expm past its own)


def _expm_scaled(m) -> jax.Array:
  """expm of one square matrix by scaling to ‖M/2ˢ‖₁ ≤ θ, Padé, and s squarings.

  `jax.scipy.linalg.expm` picks s = floor(log2(‖M‖₁/θ)), which leaves the scaled norm up
  to 2θ, past the bound its Padé degree is accurate to: for the 2k×2k matrix of the thin
  map that lost about three digits (float64, B's singular values spread over five
  decades). Here s = ceil(…), so its own call does no squaring. s is held constant for
  the derivative (the exponential does not depend on it).
  """
  theta = _PADE_THETA[jnp.finfo(m.dtype).bits // 8]  # finfo of complex: its real part
  norm = jnp.max(jnp.sum(jnp.abs(jax.lax.stop_gradient(m)), axis=-2))
  squarings = jnp.clip(jnp.ceil(jnp.log2(norm / theta)), 0, _MAX_SQUARINGS)
  scale = jnp.exp2(-squarings).astype(m.dtype)
  with jax.default_matmul_precision("highest"):
    e = jax.scipy.linalg.expm(m * scale)

  def square(e, i):
    return jax.lax.cond(i < squarings, lambda x: mm(x, x), lambda x: x, e), None

  e, _ = jax.lax.scan(square, e, jnp.arange(_MAX_SQUARINGS, dtype=squarings.dtype))
  too_large = jnp.log2(norm / theta) > _MAX_SQUARINGS
  return jnp.where(too_large, jnp.asarray(jnp.nan, e.dtype), e)


def _thin_exponential(a, b) -> jax.Array:
  """expm([[A, −Bᴴ], [B, 0]])[:, :k] in O(nk²) from A (..., k, k) and B (..., n−k, k).

  The module docstring derives it: [X; Y] = expm(M)[:, :k] with
  M = [[A, −C T⁻¹], [T, 0]], C = BᴴB, T = (C + I)^{1/2} held constant; Q = [X; B T⁻¹ Y].
  Real A, B give a real Q.
  """
  k = a.shape[-1]
  c = _gram(b)
  # V, τ = √(σ² + 1) ≥ 1 from eigh(C) = V diag(σ²) Vᴴ: constants of the derivative (Q does
  # not depend on them), so eigh's own derivative, undefined at repeated σ, is never taken.
  # In V's coordinates T = diag(τ) is inverted exactly, elementwise.
  sigma2, v = jnp.linalg.eigh(jax.lax.stop_gradient(c))
  tau = jnp.sqrt(jnp.maximum(sigma2, 0) + 1).astype(v.dtype)
  vh = jnp.conj(jnp.matrix_transpose(v))
  a_v = mm(vh, mm(a, v))
  b_v = mm(b, v)
  b_t_inv = b_v / tau[..., None, :]  # B T⁻¹ in V's coordinates, norm < 1
  c_t_inv = mm(jnp.conj(jnp.matrix_transpose(b_v)), b_t_inv)  # rounding ε‖B‖, not ε‖B‖²
  t = jnp.broadcast_to(jnp.eye(k, dtype=v.dtype), a_v.shape) * tau[..., None, :]
  m = jnp.concatenate([jnp.concatenate([a_v, -c_t_inv], axis=-1),
                       jnp.concatenate([t, jnp.zeros_like(t)], axis=-1)], axis=-2)
  first = jnp.vectorize(_expm_scaled, signature="(m,m)->(m,m)")(m)[..., :, :k]
  x, y = first[..., :k, :], first[..., k:, :]
  return jnp.concatenate([mm(v, mm(x, vh)), mm(b_t_inv, mm(y, vh))], axis=-2)


def _gram(b) -> jax.Array:
  """BᴴB, made exactly Hermitian."""
  c = mm(jnp.conj(jnp.matrix_transpose(b)), b)
  return 0.5 * (c + jnp.conj(jnp.matrix_transpose(c)))


def _unitary_blocks(lam, n: int, k: int):
  """A (..., k, k) in u(k) and complex B (..., n−k, k) from the coefficients."""
  m, batch = (n - k) * k, lam.shape[:-1]
  a = algebra.lambdas_to_skew_hermitian(lam[..., :k * k])
  b_re = lam[..., k * k:k * k + m].reshape(batch + (n - k, k))
  b_im = lam[..., k * k + m:].reshape(batch + (n - k, k))
  return a, jax.lax.complex(b_re, b_im)


def _orthogonal_blocks(mu, n: int, k: int):
  """A (..., k, k) in so(k) and real B (..., n−k, k) from the coefficients."""
  num_a, batch = k * (k - 1) // 2, mu.shape[:-1]
  # so(1) = {0}: no coefficients, the 1×1 block is zero.
  a = (algebra.lambdas_to_skew_symmetric(mu[..., :num_a]) if k >= 2
       else jnp.zeros(batch + (1, 1), mu.dtype))
  return a, mu[..., num_a:].reshape(batch + (n - k, k))


# Jitted so that an eager call (a layer's `init`) compiles one program (about 1 s on two
# cores) instead of dispatching its few dozen ops, the squaring loop's included, one by one.
@functools.partial(jax.jit, static_argnums=(1, 2))
def _thin_unitary(lam, n: int, k: int) -> jax.Array:
  return _thin_exponential(*_unitary_blocks(lam, n, k))


@functools.partial(jax.jit, static_argnums=(1, 2))
def _thin_orthogonal(mu, n: int, k: int) -> jax.Array:
  return _thin_exponential(*_orthogonal_blocks(mu, n, k))


def semi_unitary_from_lambdas(lam, n: int, k: int, method: str = "auto",
                              thin: bool | None = None) -> jax.Array:
  """Q(λ) = expm(K(λ))[:, :k], an n×k complex matrix with orthonormal columns.

  See the module docstring for K(λ) and the coefficient order. For k = n this is
  `unitary_from_lambdas(lam)`.

  Args:
    lam: real array (..., 2nk − k²) (see `num_semi_unitary_params`); leading axes are
      batch axes. float32 or float64 (integers are promoted).
    n: rows, an integer ≥ 1.
    k: orthonormal columns, 1 ≤ k ≤ n.
    method: "eigh", "pade", "taylor" or "auto", as in `expm_skew_hermitian`, for the n×n
      exponential (the thin path always runs Padé on its 2k×2k matrix).
    thin: None (default) takes the thin O(nk²) path when 2k < n, else the n×n
      exponential; True or False forces it (True is ignored for k = n). The thin
      path's scaling stops at 2³² (‖M‖₁ ≤ θ·2³², |λ| up to about 1e9): beyond, its Q is
      NaN, as Padé's past its bound; values are not checked (under jit they cannot
      raise).

  Returns:
    Complex array (..., n, k) with QᴴQ = I_k: complex64 for float32 λ, complex128 for
    float64.

  Raises:
    ValueError: if n or k is not an integer or not 1 ≤ k ≤ n, if `lam` is complex or
      half precision (float16, bfloat16), if its last axis is not 2nk − k², for an
      unknown method, or if thin is not None or a bool.
  """
  num = num_semi_unitary_params(n, k)
  n, k = int(n), int(k)
  lam = _check_coefficients(lam, num, "lam", n, k)
  expm.check_method(method)
  _check_thin(thin, n, k)
  if k == n:
    return expm.unitary_from_lambdas(lam, method=method)
  if _check_thin(thin, n, k):
    return _thin_unitary(lam, n, k)
  a, b = _unitary_blocks(lam, n, k)
  return expm.expm_skew_hermitian(_skew_from_blocks(a, b), method=method)[..., :, :k]


def semi_orthogonal_from_lambdas(mu, n: int, k: int, method: str = "auto",
                                 thin: bool | None = None) -> jax.Array:
  """Q(μ) = expm(K(μ))[:, :k], an n×k real matrix with orthonormal columns.

  See the module docstring for K(μ) and the coefficient order. For k = n ≥ 2 this is
  `orthogonal_from_lambdas(mu)`; for n = k = 1 it is [[1]] from zero coefficients.

  Args:
    mu: real array (..., nk − k(k+1)/2) (see `num_semi_orthogonal_params`); leading
      axes are batch axes. float32 or float64 (integers are promoted).
    n: rows, an integer ≥ 1.
    k: orthonormal columns, 1 ≤ k ≤ n.
    method: "eigh", "pade", "taylor" or "auto", as in `expm_skew_hermitian`, for the n×n
      exponential (the thin path always runs Padé on its 2k×2k matrix).
    thin: None (default) takes the thin O(nk²) path when 2k < n, else the n×n
      exponential; True or False forces it (True is ignored for k = n). As in
      `semi_unitary_from_lambdas`, the thin path's Q is NaN past ‖M‖₁ = θ·2³².

  Returns:
    Real array (..., n, k) of μ's dtype with QᵀQ = I_k.

  Raises:
    ValueError: if n or k is not an integer or not 1 ≤ k ≤ n, if `mu` is complex or
      half precision (float16, bfloat16), if its last axis is not nk − k(k+1)/2, for
      an unknown method, or if thin is not None or a bool.
  """
  num = num_semi_orthogonal_params(n, k)
  n, k = int(n), int(k)
  mu = _check_coefficients(mu, num, "mu", n, k)
  expm.check_method(method)
  use_thin = _check_thin(thin, n, k)
  batch = mu.shape[:-1]
  if k == n:
    if n == 1:
      return jnp.ones(batch + (1, 1), mu.dtype)
    return expm.orthogonal_from_lambdas(mu, method=method)
  if use_thin:
    return _thin_orthogonal(mu, n, k)
  skew = _skew_from_blocks(*_orthogonal_blocks(mu, n, k))
  if method == "auto":
    # Not the real square rule: Padé on [[A, −Bᵀ], [B, 0]] (a large norm, many
    # squarings) was slower than eigh for the rectangular maps timed on CPU
    # (docs/benchmarks.md, "Choosing a backend").
    method = expm.choose_method(n, max(math.prod(batch), 1))  # an empty batch: any
  return expm.expm_skew_symmetric(skew, method=method)[..., :, :k]
