"""How far a weight matrix is from an isometry, and its spectrum: for monitoring training.

Computed on the host in float64/complex128 (NumPy), whatever W's dtype, so a float32
layer's rounding shows as it is. Not for use under `jax.jit`: it returns Python floats.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["IsometryReport", "isometry_report"]


class IsometryReport(NamedTuple):
  """The result of `isometry_report`; all singular values are 1 for an exact (co-)isometry.

  Attributes:
    shape: (k, n).
    kind: "unitary" (k = n), "isometry" (k > n) or "co-isometry" (k < n).
    error: max |WᴴW − I| (k ≥ n) or max |WWᴴ − I| (k < n), a float.
    singular_min: the smallest singular value, a float.
    singular_max: the largest singular value, a float.
    phases: square W: float64 array (n,) of eigenvalue angles, sorted; else None.
    modulus_error: square W: max ||μ| − 1| over eigenvalues μ; else None.
  """
  shape: tuple[int, int]
  kind: str
  error: float
  singular_min: float
  singular_max: float
  phases: np.ndarray | None
  modulus_error: float | None

  def __str__(self):
    text = (f"{self.kind} {self.shape[0]}x{self.shape[1]}: error {self.error:.3g}, "
            f"singular values in [{self.singular_min:.6g}, {self.singular_max:.6g}]")
    if self.phases is not None:
      text += f", eigenvalue moduli within {self.modulus_error:.3g} of 1"
    return text


def isometry_report(matrix) -> IsometryReport:
  """Isometry error, singular values and (square) spectrum of a (k, n) matrix.

  Args:
    matrix: real or complex array (k, n), NumPy or JAX (e.g. a layer's ``matrix()``).

  Returns:
    An `IsometryReport` of Python floats (and a NumPy array of phases if square).

  Raises:
    ValueError: if `matrix` is not 2-D, is empty, or has non-finite entries.
  """
  w = np.asarray(matrix)
  if w.ndim != 2 or w.size == 0:
    raise ValueError(f"matrix must be a non-empty 2-D array (k, n); got shape {w.shape}.")
  if not np.all(np.isfinite(w)):
    raise ValueError("matrix has non-finite entries (NaN or inf).")
  w = w.astype(np.complex128 if np.iscomplexobj(w) else np.float64)
  k, n = w.shape
  gram = w.conj().T @ w if k >= n else w @ w.conj().T
  error = float(np.max(np.abs(gram - np.eye(min(k, n)))))
  singular = np.linalg.svd(w, compute_uv=False)
  phases = modulus_error = None
  kind = "unitary" if k == n else ("isometry" if k > n else "co-isometry")
  if k == n:
    eig = np.linalg.eigvals(w)
    phases = np.sort(np.angle(eig))
    modulus_error = float(np.max(np.abs(np.abs(eig) - 1.0)))
  return IsometryReport((k, n), kind, error, float(singular.min()), float(singular.max()),
                        phases, modulus_error)
