"""The principal logarithm of a unitary matrix, U -> λ, on every backend.

`jnp.linalg.eig` runs on CPU only, but a unitary U is normal: its eigenvectors also
diagonalise the Hermitian matrix H = (U + Uᴴ)/2 + c (U - Uᴴ)/(2i), whose eigenvalue
for eigenphase φ is cos φ + c sin φ. `eigh(H)` therefore works on GPU and TPU. Two
eigenphases φ ≠ φ' collide in H when cos φ + c sin φ = cos φ' + c sin φ'; we try two
values of c and keep the decomposition that diagonalises U best.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lie_unitary import algebra
from lie_unitary import sequencing
from lie_unitary.precision import matmul as mm

__all__ = ["lambdas_from_unitary", "log_from_eigendecomposition", "log_unitary",
           "unitary_eigendecomposition"]

_MIXING = (0.5772156649, -1.6180339887)  # two unrelated constants


def _eigen_with(u, c):
  uh = jnp.conj(jnp.matrix_transpose(u))
  herm = 0.5 * (u + uh) + (c / 2j) * (u - uh)
  _, w = jnp.linalg.eigh(herm)
  d = mm(mm(jnp.conj(jnp.matrix_transpose(w)), u), w)
  diag = jnp.diagonal(d, axis1=-2, axis2=-1)
  off = jnp.sum(jnp.abs(d) ** 2, axis=(-2, -1)) - jnp.sum(jnp.abs(diag) ** 2, axis=-1)
  return jnp.angle(diag), w, off  # principal branch, (-π, π]


def unitary_eigendecomposition(u) -> tuple[jax.Array, jax.Array]:
  """Principal eigenphases φ and eigenvectors W of a unitary U = W diag(e^{iφ}) Wᴴ.

  Args:
    u: complex array (..., n, n), unitary (a real orthogonal matrix is promoted).

  Returns:
    ``(phases, w)``: real (..., n) eigenphases in (-π, π] (unsorted) and complex
    (..., n, n) unitary W whose columns are the eigenvectors.

  Raises:
    ValueError: if `u` is not square, or half precision (float16, bfloat16).
  """
  u = algebra.as_complex_square(u, "u")
  phases_a, w_a, off_a = _eigen_with(u, _MIXING[0])
  # The second eigh waits for the first: two batched eighs in flight at once can
  # deadlock jaxlib's CPU thread pool (`lie_unitary.sequencing`).
  phases_b, w_b, off_b = _eigen_with(sequencing.after(u, w_a), _MIXING[1])
  better_a = off_a <= off_b
  return (jnp.where(better_a[..., None], phases_a, phases_b),
          jnp.where(better_a[..., None, None], w_a, w_b))


def log_from_eigendecomposition(phases, w) -> jax.Array:
  """K = W diag(iφ) Wᴴ: the logarithm with eigenphases φ in the eigenbasis W.

  Args:
    phases: real array (..., n).
    w: complex array (..., n, n), unitary (a real orthogonal matrix is promoted:
      float32 -> complex64, float64 -> complex128).

  Returns:
    Complex array (..., n, n), w's complex dtype, skew-Hermitian (up to rounding).

  Raises:
    ValueError: if `w` is not a square matrix or is half precision, if `phases` is
      complex, or if phases' shape is not w's without its last axis.
  """
  w = algebra.as_complex_square(w, "w")
  phases = jnp.asarray(phases)
  if jnp.iscomplexobj(phases) or phases.shape != w.shape[:-1]:
    raise ValueError(f"phases must be real {w.shape[:-1]} for w of shape {w.shape}; got "
                     f"shape {phases.shape}, dtype {phases.dtype}.")
  return mm(w * (1j * phases).astype(w.dtype)[..., None, :], jnp.conj(jnp.matrix_transpose(w)))


def log_unitary(u) -> jax.Array:
  """Principal logarithm K of a unitary U: expm(K) = U, eigenvalues of K in i·(-π, π].

  Args:
    u: complex array (..., n, n), unitary (a real orthogonal matrix is promoted). Not
      checked (jit-friendly): for a matrix that is not unitary the result is not a
      logarithm of u (project it first: `lie_unitary.polar_unitary`).

  Returns:
    Complex array (..., n, n), skew-Hermitian (up to rounding).

  Raises:
    ValueError: if `u` is not square, or half precision (float16, bfloat16).

  The result is only defined up to the branch cut: an eigenvalue at exactly -1 maps
  to ±iπ. Not meant to be differentiated.
  """
  return log_from_eigendecomposition(*unitary_eigendecomposition(u))


def lambdas_from_unitary(u) -> jax.Array:
  """Coefficients λ (..., n²) of the principal logarithm: `unitary_from_lambdas(λ) ≈ U`.

  Args:
    u: complex array (..., n, n), unitary.

  Returns:
    Real array (..., n²), float32 for complex64 input, float64 for complex128.

  Raises:
    ValueError: if `u` is not square or is half precision.
  """
  return algebra.skew_hermitian_to_lambdas(log_unitary(u))
