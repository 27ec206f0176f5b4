"""expm of a skew-Hermitian matrix from one eigh, with an O(n³) spectral reverse rule.

Forward: iK is Hermitian for K = (L - Lᴴ)/2, so eigh(iK) = W diag(θ) Wᴴ gives
K = W diag(-iθ) Wᴴ and U = expm(K) = W diag(e^{-iθ}) Wᴴ.

Reverse (Daleckii–Krein): dU = W (F ∘ (Wᴴ dK W)) Wᴴ with
F_ij = (e^{d_i} - e^{d_j}) / (d_i - d_j), d = -iθ; written in θ it is

    F_ij = e^{-i(θ_i + θ_j)/2} · sinc(Δ_ij / 2),  Δ_ij = θ_i - θ_j,

which is exact and finite for equal eigenvalues (K = 0 has all of them equal).
For JAX's cotangent convention (Ḡ = ∂C/∂Re U - i ∂C/∂Im U) the transpose is
K̄ = conj(W) [(Wᵀ Ḡ conj(W)) ∘ F] Wᵀ, and L̄ = (K̄ - K̄ᴴ)/2 because only the
skew-Hermitian part of L enters the forward pass. Four n×n matmuls, one Hadamard
product: O(n³) time and O(n²) memory, against the paper's O(n⁵) per-parameter rule.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lie_unitary import algebra

__all__ = ["expm_skew_hermitian", "orthogonal_from_lambdas", "unitary_from_lambdas"]


def _mT(x):
  return jnp.swapaxes(x, -1, -2)


def _eigh_of_i_skew(skew):
  """θ, W with i·skew_part(L) = W diag(θ) Wᴴ. eigh symmetrises its input itself."""
  theta, w = jnp.linalg.eigh(1j * skew, symmetrize_input=True)
  return theta, w


def _expm_from_eig(theta, w):
  phase = jnp.exp(-1j * theta).astype(w.dtype)
  return (w * phase[..., None, :]) @ jnp.conj(_mT(w))


@jax.custom_vjp
def _expm_skew_hermitian(skew):
  return _expm_from_eig(*_eigh_of_i_skew(skew))


def _expm_fwd(skew):
  theta, w = _eigh_of_i_skew(skew)
  return _expm_from_eig(theta, w), (theta, w)


def _expm_bwd(res, g):
  theta, w = res
  real_dtype = theta.dtype
  half_sum = 0.5 * (theta[..., :, None] + theta[..., None, :])
  half_gap = 0.5 * (theta[..., :, None] - theta[..., None, :])
  # sinc(Δ/2) with jnp.sinc(x) = sin(πx)/(πx): no 0/0 on (near-)equal eigenvalues.
  sinc = jnp.sinc(half_gap / jnp.asarray(jnp.pi, real_dtype))
  f = jax.lax.complex(jnp.cos(half_sum) * sinc, -jnp.sin(half_sum) * sinc)
  w_conj = jnp.conj(w)
  inner = (_mT(w) @ g @ w_conj) * f
  k_bar = w_conj @ inner @ _mT(w)
  # Only the skew-Hermitian part of L reaches the output: project the cotangent.
  return (0.5 * (k_bar - jnp.conj(_mT(k_bar))),)


_expm_skew_hermitian.defvjp(_expm_fwd, _expm_bwd)


def expm_skew_hermitian(skew) -> jax.Array:
  """U = expm(K) for K = (L - Lᴴ)/2, the skew-Hermitian part of L, via one eigh.

  Only the skew-Hermitian part of `skew` is used (`jnp.linalg.eigh` symmetrises
  its input); for skew-Hermitian L this is exactly expm(L), and U is unitary for
  every input. The reverse-mode derivative is the O(n³) spectral rule of the module
  docstring, exact and finite at repeated eigenvalues (e.g. L = 0); its cotangent is
  projected onto the skew-Hermitian part to match the forward pass.

  It is a `jax.custom_vjp`: `jax.grad`, `jax.vjp` and `jax.jacrev` work, but
  forward-mode (`jax.jvp`, `jax.jacfwd`) does not.

  Args:
    skew: array (..., n, n); complex64/complex128, or real (read as a real matrix,
      whose skew-symmetric part is used), float32 -> complex64, float64 -> complex128.

  Returns:
    Complex array (..., n, n), unitary.

  Raises:
    ValueError: if `skew` is not a square matrix (rank < 2 or unequal last axes).
  """
  skew = jnp.asarray(skew)
  if skew.ndim < 2 or skew.shape[-1] != skew.shape[-2]:
    raise ValueError(f"skew must be square with shape (..., n, n); got {skew.shape=}.")
  if not jnp.iscomplexobj(skew):
    if not jnp.issubdtype(skew.dtype, jnp.floating):
      skew = skew.astype(jnp.result_type(float))
    skew = skew.astype(algebra.complex_dtype_for(skew.dtype))
  return _expm_skew_hermitian(skew)


def unitary_from_lambdas(lam) -> jax.Array:
  """U(λ) = expm(Σ_j λ_j T_j), the paper's parametrization of U(n).

  Args:
    lam: real array (..., n²) of u(n) coefficients in the order of `basis(n)`.

  Returns:
    Complex array (..., n, n), unitary; complex64 for float32 λ, complex128 for float64.

  Raises:
    ValueError: if `lam` is complex or its last axis is not a perfect square.
  """
  return expm_skew_hermitian(algebra.lambdas_to_skew_hermitian(lam))


def orthogonal_from_lambdas(mu) -> jax.Array:
  """R(μ) = expm(A(μ)), a real special orthogonal matrix from so(n) coefficients.

  Args:
    mu: real array (..., n(n-1)/2); see `lambdas_to_skew_symmetric` for the order.

  Returns:
    Real array (..., n, n) of the same dtype, orthogonal with determinant +1.

  Raises:
    ValueError: if `mu` is complex or its length is not n(n-1)/2 for an integer n ≥ 2.
  """
  skew = algebra.lambdas_to_skew_symmetric(mu)
  return jnp.real(expm_skew_hermitian(skew))
