"""Random unitary matrices: the paper's three generators (§3.2) and exact Haar.

- ``qr``: Q of the QR decomposition of a matrix with real and imaginary parts
  ~ U[0, 1), as the original code did. Q is kept as returned, so this is NOT
  Haar-distributed (the paper's text says it is; the diagonal of R is not fixed).
- ``haar``: exactly Haar-distributed (complex Gaussian, Q times the phases of diag R),
  via `jax.random.orthogonal` with a complex dtype.
- ``lie``: U = expm(Σ λ_j T_j), λ_j ~ N(0, 1).
- ``composition``: Arjovsky's D3 R2 F⁻¹ D2 Π R1 F D1 with angles ~ U(-π, π) and
  reflection entries ~ U(-s, s), s = sqrt(6 / (2 + 2n)) as in the original code
  (the paper's text writes sqrt(6 / 2n); pass `reflection_scale` to choose).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from lie_unitary import algebra
from lie_unitary import composition
from lie_unitary import expm

__all__ = ["GENERATORS", "random_arjovsky_params", "random_unitary"]

GENERATORS = ("qr", "haar", "lie", "composition")


def _real_dtype_of(dtype):
  return jnp.finfo(algebra.complex_dtype(dtype)).dtype


def random_arjovsky_params(key, n: int, dtype=jnp.float32, reflection_scale: float | None = None):
  """Draws the composition generator's parameters (paper §3.2).

  Args:
    key: PRNG key.
    n: matrix size, a positive integer.
    dtype: real dtype of the angles and reflections.
    reflection_scale: s > 0 of U(-s, s); default sqrt(6 / (2 + 2n)) as the original code.

  Returns:
    dict with ``angles`` (3, n) ~ U(-π, π), ``reflections_re``/``reflections_im``
    (2, n) ~ U(-s, s) and ``permutation`` (n,) int32, a uniform random permutation.

  Raises:
    ValueError: if n is not a positive integer, dtype is not float32 or float64, or
      `reflection_scale` is not a finite float > 0 (a zero reflection vector defines no
      reflection).
  """
  n = algebra.check_positive_int(n)
  dtype = algebra.check_real_dtype(dtype)
  s = algebra.check_finite_real(reflection_scale, "reflection_scale", positive=True,
                                allow_none=True)
  s = math.sqrt(6.0 / (2.0 + 2.0 * n)) if s is None else s
  k_ang, k_re, k_im, k_perm = jax.random.split(key, 4)
  return dict(
      angles=jax.random.uniform(k_ang, (3, n), dtype, -jnp.pi, jnp.pi),
      reflections_re=jax.random.uniform(k_re, (2, n), dtype, -s, s),
      reflections_im=jax.random.uniform(k_im, (2, n), dtype, -s, s),
      permutation=jax.random.permutation(k_perm, n).astype(jnp.int32),
  )


def random_unitary(key, n: int, method: str = "haar", dtype=jnp.complex64,
                   reflection_scale: float | None = None) -> jax.Array:
  """Draws one random n×n unitary matrix.

  Vectorise over keys with `jax.vmap(lambda k: random_unitary(k, n, method))`.

  Args:
    key: PRNG key.
    n: matrix size, a positive integer (static).
    method: one of ``GENERATORS``: "qr", "haar", "lie", "composition" (module docstring).
    dtype: complex64 or complex128.
    reflection_scale: only for "composition"; see `random_arjovsky_params`.

  Returns:
    Complex array (n, n) of `dtype`, unitary.

  Raises:
    ValueError: for an unknown method, a non-complex dtype, n not a positive integer, or
      a `reflection_scale` that is not a finite float > 0 or is given to another method.
  """
  if method not in GENERATORS:
    raise ValueError(f"unknown generator method {method!r}; expected one of {GENERATORS}.")
  n = algebra.check_positive_int(n)
  dtype = algebra.complex_dtype(dtype)  # None: the default complex
  real = _real_dtype_of(dtype)
  algebra.check_finite_real(reflection_scale, "reflection_scale", positive=True, allow_none=True)
  if reflection_scale is not None and method != "composition":
    raise ValueError(f"reflection_scale is a parameter of method 'composition', not {method!r}.")
  if method == "qr":
    k_re, k_im = jax.random.split(key)
    a = jax.lax.complex(jax.random.uniform(k_re, (n, n), real),
                        jax.random.uniform(k_im, (n, n), real))
    q, _ = jnp.linalg.qr(a)
    return q
  if method == "haar":
    return jax.random.orthogonal(key, n, dtype=dtype)
  if method == "lie":
    return expm.unitary_from_lambdas(jax.random.normal(key, (n * n,), real))
  params = random_arjovsky_params(key, n, real, reflection_scale)
  return composition.arjovsky_unitary(**params)
