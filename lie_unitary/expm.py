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

Implementation: with p = e^{-iθ/2}, Wp = W diag(p) and Wq = conj(W) diag(p), U = Wp Wqᵀ
and K̄ = conj(W) [(Wpᵀ Ḡ Wq) ∘ S] Wᵀ with the REAL matrix S_ij = sinc(Δ_ij/2): the
phases of F ride on Wp and Wq, and the only n×n transcendental is one sinc. `unitary_from_lambdas` has its own
custom_vjp over λ whose reverse pass reads λ̄ straight out of K̄ with gathers
(`algebra.cotangent_to_lambdas`), skipping the projection and the scatter that the
transpose of the λ -> L gather would cost.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lie_unitary import algebra
from lie_unitary.precision import matmul as mm

__all__ = ["expm_skew_hermitian", "orthogonal_from_lambdas", "unitary_from_lambdas"]


def _mT(x):
  return jnp.swapaxes(x, -1, -2)


def _spectral_factors(hermitian, symmetrize):
  """eigh(i·L) = W diag(θ) Wᴴ, returned as θ, W, Wp = W diag(p), Wq = conj(W) diag(p).

  With p = e^{-iθ/2}: U = W diag(p²) Wᴴ = Wp Wqᵀ, and the phase factor of F splits as
  e^{-i(θ_i+θ_j)/2} = p_i p_j, so the only n×n transcendental left in the reverse
  rule is the real sinc. `hermitian` is i·L; eigh symmetrises it if asked.
  """
  theta, w = jnp.linalg.eigh(hermitian, symmetrize_input=symmetrize)
  p = jnp.exp(-0.5j * theta).astype(w.dtype)[..., None, :]
  return theta, w, w * p, jnp.conj(w) * p


def _spectral_cotangent(theta, w, wp, wq, g):
  """K̄ = conj(W) [(Wᵀ Ḡ conj(W)) ∘ F] Wᵀ = conj(W) [(Wpᵀ Ḡ Wq) ∘ S] Wᵀ, S_ij = sinc(Δ_ij/2).

  Not yet projected onto u(n): callers project (or read coefficients, which projects).
  """
  half_gap = 0.5 * (theta[..., :, None] - theta[..., None, :])
  # jnp.sinc(x) = sin(πx)/(πx): exact at Δ = 0, no 0/0 for (near-)equal eigenvalues.
  sinc = jnp.sinc(half_gap / jnp.asarray(jnp.pi, theta.dtype))
  inner = mm(mm(_mT(wp), g), wq) * sinc.astype(wp.dtype)
  return mm(mm(jnp.conj(w), inner), _mT(w))


def _forward(hermitian, symmetrize=True):
  theta, w, wp, wq = _spectral_factors(hermitian, symmetrize)
  return mm(wp, _mT(wq)), (theta, w, wp, wq)


@jax.custom_vjp
def _expm_skew_hermitian(skew):
  return _forward(1j * skew)[0]


def _expm_fwd(skew):
  return _forward(1j * skew)


def _expm_bwd(res, g):
  k_bar = _spectral_cotangent(*res, g)
  # Only the skew-Hermitian part of L reaches the output: project the cotangent.
  return (0.5 * (k_bar - jnp.conj(_mT(k_bar))),)


_expm_skew_hermitian.defvjp(_expm_fwd, _expm_bwd)


# i·L(λ) is Hermitian by construction: no symmetrising pass before eigh.
@jax.custom_vjp
def _unitary_from_lambdas(lam):
  return _forward(algebra.lambdas_to_hermitian(lam), symmetrize=False)[0]


def _unitary_fwd(lam):
  return _forward(algebra.lambdas_to_hermitian(lam), symmetrize=False)


def _unitary_bwd(res, g):
  # λ̄_j = Re Σ K̄ ∘ T_j: a gather of the entries of K̄, no projection or scatter needed.
  return (algebra.cotangent_to_lambdas(_spectral_cotangent(*res, g)),)


_unitary_from_lambdas.defvjp(_unitary_fwd, _unitary_bwd)


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
  skew = algebra.as_complex_square(skew, "skew")
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
  lam = algebra.check_lambdas(lam)
  return _unitary_from_lambdas(lam)


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
