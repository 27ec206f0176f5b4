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

__all__ = ["log_unitary", "lambdas_from_unitary"]

_MIXING = (0.5772156649, -1.6180339887)  # two unrelated constants


def _mT(x):
  return jnp.swapaxes(x, -1, -2)


def _log_with(u, c):
  uh = jnp.conj(_mT(u))
  herm = 0.5 * (u + uh) + (c / 2j) * (u - uh)
  _, w = jnp.linalg.eigh(herm)
  d = mm(mm(jnp.conj(_mT(w)), u), w)
  diag = jnp.diagonal(d, axis1=-2, axis2=-1)
  off = jnp.sum(jnp.abs(d) ** 2, axis=(-2, -1)) - jnp.sum(jnp.abs(diag) ** 2, axis=-1)
  phases = jnp.angle(diag)  # principal branch, (-π, π]
  log = mm(w * (1j * phases).astype(w.dtype)[..., None, :], jnp.conj(_mT(w)))
  return log, off


def log_unitary(u) -> jax.Array:
  """Principal logarithm K of a unitary U: expm(K) = U, eigenvalues of K in i·(-π, π].

  Args:
    u: complex array (..., n, n), unitary (a real orthogonal matrix is promoted).

  Returns:
    Complex array (..., n, n), skew-Hermitian (up to rounding).

  Raises:
    ValueError: if `u` is not square.

  The result is only defined up to the branch cut: an eigenvalue at exactly -1 maps
  to ±iπ. Not meant to be differentiated.
  """
  u = algebra.as_complex_square(u, "u")
  log_a, off_a = _log_with(u, _MIXING[0])
  # The second eigh waits for the first: two batched eighs in flight at once can
  # deadlock jaxlib's CPU thread pool (`lie_unitary.sequencing`).
  log_b, off_b = _log_with(sequencing.after(u, log_a), _MIXING[1])
  return jnp.where((off_a <= off_b)[..., None, None], log_a, log_b)


def lambdas_from_unitary(u) -> jax.Array:
  """Coefficients λ (..., n²) of the principal logarithm: `unitary_from_lambdas(λ) ≈ U`.

  Args:
    u: complex array (..., n, n), unitary.

  Returns:
    Real array (..., n²), float32 for complex64 input, float64 for complex128.

  Raises:
    ValueError: if `u` is not square.
  """
  return algebra.skew_hermitian_to_lambdas(log_unitary(u))
