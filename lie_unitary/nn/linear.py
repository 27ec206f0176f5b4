"""Flax linen layers that apply a learned unitary or orthogonal matrix."""

from __future__ import annotations

from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from lie_unitary import expm
from lie_unitary.precision import matmul as mm

__all__ = ["OrthogonalLinear", "UnitaryLinear"]

Initializer = Callable[..., jax.Array]


class UnitaryLinear(nn.Module):
  """y = U(λ) x on the last axis, with U(λ) = expm(Σ λ_j T_j) unitary.

  Input is complex (..., n), or real (..., 2n) holding [Re x, Im x] when
  ``real_pairs`` is set (the output then has the same layout). U is computed once per
  call, however many leading batch dimensions x has, and applied at HIGHEST matmul
  precision so the map stays norm-preserving on GPU/TPU (see `lie_unitary.precision`).

  Attributes:
    features: n, the size of the complex vectors.
    real_pairs: read and write real [Re, Im] halves instead of complex arrays.
    lambda_init: initializer of λ (n²,); default N(0, 1) as the paper. Use
      `nn.initializers.zeros` to start at the identity.
    param_dtype: float32 (U complex64) or float64 (U complex128).
  """
  features: int
  real_pairs: bool = False
  lambda_init: Initializer = nn.initializers.normal(stddev=1.0)
  param_dtype: Any = jnp.float32

  def setup(self):
    if self.features < 1:
      raise ValueError(f"features must be ≥ 1; got {self.features}.")
    self.lam = self.param("lam", self.lambda_init, (self.features ** 2,), self.param_dtype)

  def unitary(self) -> jax.Array:
    """The (n, n) complex matrix U(λ)."""
    return expm.unitary_from_lambdas(self.lam)

  def __call__(self, x):
    """Applies U. Raises ValueError if x's last axis or dtype does not fit."""
    x = jnp.asarray(x)
    n = self.features
    if self.real_pairs:
      if jnp.iscomplexobj(x) or x.shape[-1] != 2 * n:
        raise ValueError(
            f"real_pairs=True expects real input (..., 2n) = (..., {2 * n}); got "
            f"{x.shape=}, {x.dtype=}.")
      u = self.unitary()
      re, im = x[..., :n], x[..., n:]
      out = mm(jax.lax.complex(re, im).astype(u.dtype), u.T)
      return jnp.concatenate([jnp.real(out), jnp.imag(out)], axis=-1)
    if not jnp.iscomplexobj(x):
      raise ValueError(
          f"UnitaryLinear expects complex input (..., {n}); got {x.dtype=}. For real "
          "[Re, Im] pairs set real_pairs=True; for real vectors use OrthogonalLinear.")
    if x.shape[-1] != n:
      raise ValueError(f"expected input (..., {n}); got {x.shape=}.")
    return mm(x, self.unitary().T)


class OrthogonalLinear(nn.Module):
  """y = R(μ) x on the last axis, with R(μ) = expm(A(μ)) in SO(n), A skew-symmetric.

  Attributes:
    features: n, the size of the real vectors (n ≥ 2).
    lambda_init: initializer of μ (n(n-1)/2,); default N(0, 1).
    param_dtype: float32 or float64.
  """
  features: int
  lambda_init: Initializer = nn.initializers.normal(stddev=1.0)
  param_dtype: Any = jnp.float32

  def setup(self):
    if self.features < 2:
      raise ValueError(f"features must be ≥ 2 for so(n); got {self.features}.")
    n = self.features
    self.mu = self.param("mu", self.lambda_init, (n * (n - 1) // 2,), self.param_dtype)

  def orthogonal(self) -> jax.Array:
    """The (n, n) real matrix R(μ)."""
    return expm.orthogonal_from_lambdas(self.mu)

  def __call__(self, x):
    """Applies R. Raises ValueError if x is complex or its last axis is not n."""
    x = jnp.asarray(x)
    if jnp.iscomplexobj(x) or x.shape[-1] != self.features:
      raise ValueError(
          f"OrthogonalLinear expects real input (..., {self.features}); got {x.shape=}, "
          f"{x.dtype=}.")
    return mm(x, self.orthogonal().T)
