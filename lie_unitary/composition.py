"""Arjovsky et al.'s restricted unitary composition U = D3 R2 F⁻¹ D2 Π R1 F D1 (7n reals).

- D_k = diag(e^{iα_k}): n angles each.
- R_k = I - 2 v vᴴ / ‖v‖² for complex v = v_re + i v_im (2n reals each; the length of
  v does not matter).
- F: the unitary DFT (norm="ortho"); Π: a fixed permutation (not trained).

Everything trainable is real; `arjovsky_apply` acts on vectors in O(n log n) without
forming U, `arjovsky_unitary` forms the n×n matrix.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import algebra

__all__ = ["arjovsky_apply", "arjovsky_unitary"]


def _check(angles, reflections_re, reflections_im, permutation):
  angles = jnp.asarray(angles)
  reflections_re = jnp.asarray(reflections_re)
  reflections_im = jnp.asarray(reflections_im)
  permutation = jnp.asarray(permutation)
  for name, arr in (("angles", angles), ("reflections_re", reflections_re),
                    ("reflections_im", reflections_im)):
    if jnp.iscomplexobj(arr):
      raise ValueError(f"{name} must be real; got dtype {arr.dtype}.")
  if angles.ndim != 2 or angles.shape[0] != 3 or angles.shape[1] < 1:
    raise ValueError(f"angles must have shape (3, n), n ≥ 1; got {angles.shape=}.")
  # Integers are promoted to the default float, as elsewhere in the library.
  angles, reflections_re, reflections_im = (
      a if jnp.issubdtype(a.dtype, jnp.inexact) else a.astype(float)
      for a in (angles, reflections_re, reflections_im))
  for name, arr in (("angles", angles), ("reflections_re", reflections_re),
                    ("reflections_im", reflections_im)):
    algebra.check_real_dtype(arr.dtype, f"the dtype of {name}")
  n = angles.shape[1]
  if reflections_re.shape != (2, n) or reflections_im.shape != (2, n):
    raise ValueError(
        f"reflections_re and reflections_im must have shape (2, {n}); got "
        f"{reflections_re.shape=}, {reflections_im.shape=}.")
  if permutation.shape != (n,) or not jnp.issubdtype(permutation.dtype, jnp.integer):
    raise ValueError(
        f"permutation must be an integer array of shape ({n},); got "
        f"{permutation.shape=}, {permutation.dtype=}.")
  # Values are checked where they are known (not under jit): an index array that is not
  # a permutation would make U non-unitary, and jnp's indexing clamps or wraps it.
  if not isinstance(permutation, jax.core.Tracer) and not np.array_equal(
      np.sort(np.asarray(permutation)), np.arange(n)):
    raise ValueError(f"permutation must hold each of 0..{n - 1} once; got "
                     f"{np.asarray(permutation).tolist()}.")
  return angles, reflections_re, reflections_im, permutation


def _reflect(x, v):
  """(I - 2 v vᴴ/‖v‖²) x for x (B, n), v (n,)."""
  v = v[None, :]
  coef = jnp.sum(jnp.conj(v) * x, axis=-1, keepdims=True)
  return x - (2.0 / jnp.sum(jnp.abs(v) ** 2)) * coef * v


def arjovsky_apply(x, angles, reflections_re, reflections_im, permutation) -> jax.Array:
  """Applies U = D3 R2 F⁻¹ D2 Π R1 F D1 to the vectors on the last axis of x.

  Args:
    x: complex array (..., n) (a real x is promoted to the complex dtype of angles).
    angles: real (3, n), the phases of D1, D2, D3.
    reflections_re, reflections_im: real (2, n) each, v1 and v2 of R1, R2 (nonzero:
      R = I − 2vvᴴ/‖v‖² is undefined at v = 0, and gives NaN there).
    permutation: integer (n,), Π as an index array: (Π x)_i = x_{permutation[i]}.

  Returns:
    Complex array (..., n): U x for every vector.

  Raises:
    ValueError: on mismatched shapes, complex or half-precision angles/reflections, or
      a concrete `permutation` that is not one of 0..n−1 (under jit its values are not
      checked).
  """
  angles, v_re, v_im, permutation = _check(angles, reflections_re, reflections_im, permutation)
  cdtype = algebra.complex_dtype_for(angles.dtype)
  x = jnp.asarray(x).astype(jnp.result_type(jnp.asarray(x).dtype, cdtype))
  if x.ndim < 1 or x.shape[-1] != angles.shape[1]:
    raise ValueError(f"x must have last axis n={angles.shape[1]}; got {x.shape=}.")
  batch_shape = x.shape[:-1]
  x = x.reshape(-1, x.shape[-1])  # (B, n): explicit broadcasting below
  d = jnp.exp(1j * angles).astype(x.dtype)[:, None, :]
  v = jax.lax.complex(v_re, v_im).astype(x.dtype)
  x = d[0] * x
  x = jnp.fft.fft(x, axis=-1, norm="ortho")
  x = _reflect(x, v[0])
  x = x[..., permutation]
  x = d[1] * x
  x = jnp.fft.ifft(x, axis=-1, norm="ortho")
  x = _reflect(x, v[1])
  return (d[2] * x).reshape(batch_shape + x.shape[-1:])


def arjovsky_unitary(angles, reflections_re, reflections_im, permutation) -> jax.Array:
  """The n×n matrix U = D3 R2 F⁻¹ D2 Π R1 F D1.

  Args: as `arjovsky_apply` (without x).

  Returns:
    Complex array (n, n), unitary; complex64 for float32 angles, complex128 for float64.

  Raises:
    ValueError: on mismatched shapes, complex or half-precision angles/reflections, or
      a concrete `permutation` that is not one of 0..n−1 (under jit its values are not
      checked).
  """
  angles = jnp.asarray(angles)
  n = angles.shape[-1] if angles.ndim == 2 else 0
  eye = jnp.eye(n, dtype=algebra.complex_dtype_for(angles.dtype))
  # Row j of the result is U e_j, i.e. column j of U.
  return arjovsky_apply(eye, angles, reflections_re, reflections_im, permutation).T
