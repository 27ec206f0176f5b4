"""Flax linen layers that apply a learned unitary or orthogonal map, of any shape.

Like `flax.linen.Dense`, each takes its output size k (``features``) and reads the input
size n from the input: y = W x, W (k, n) an isometry (k ≥ n) or a co-isometry (k < n)
(`lie_unitary.nn.weights`); for k = n the parameters are those of the square maps.
"""

from __future__ import annotations

from typing import Any
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from lie_unitary import algebra
from lie_unitary.nn import weights

__all__ = ["OrthogonalLinear", "UnitaryLinear"]

Initializer = Callable[..., jax.Array]


class UnitaryLinear(nn.Module):
  """y = W(λ) x (+ b) on the last axis: complex n -> k with W (k, n) a (co-)isometry.

  Input is complex (..., n), or real (..., 2n) holding [Re x, Im x] with ``real_pairs``
  (integers promoted; the output is then real (..., 2k)). W is formed once per call (one
  eigh) and applied at HIGHEST matmul precision. Parameters: ``lam`` real (2nk −
  min(n, k)²,) ((n²,) for k = n: W = `unitary_from_lambdas(lam)`); with ``use_bias``,
  ``bias`` real (2k,) [Re b, Im b]. The matrix: ``layer.apply(variables, n,
  method="matrix")`` (n, the complex input size, is not recorded by the parameters);
  square: ``method="unitary"``.

  Attributes:
    features: k, the output size (complex units), an integer ≥ 1.
    real_pairs: read and write real [Re, Im] halves instead of complex arrays.
    lambda_init: initializer of λ; default N(0, 1) as the paper.
    param_dtype: float32 (W complex64) or float64 (W complex128); half precision
      raises ValueError when W is formed.
    use_bias: add a learned complex bias b.
    bias_init: initializer of the real (2k,) bias; default zeros.
    rebased: square layers only: W = W₀ · U(λ) (PyTorch's "trivialization"), the base
      W₀ complex (n, n) in the variable collection `BASE_COLLECTION` (drawn at init as
      U(λ₀), λ₀ from ``lambda_init``: the same W as without it), λ starting at 0, where
      the exponential is cheapest; move the base with `lie_unitary.nn.rebase`.
  """
  features: int
  real_pairs: bool = False
  lambda_init: Initializer = nn.initializers.normal(stddev=1.0)
  param_dtype: Any = jnp.float32
  use_bias: bool = False
  bias_init: Initializer = nn.initializers.zeros
  rebased: bool = False

  @nn.compact
  def _weight_and_bias(self, in_features: int):
    k = weights.check_features(self.features)
    num = weights.num_unitary_weight_params(in_features, k)
    bias = (self.param("bias", self.bias_init, (2 * k,), self.param_dtype)
            if self.use_bias else None)
    if self.rebased:
      weights.check_rebased(in_features, k, "UnitaryLinear")
      base = self.variable(weights.BASE_COLLECTION, "base", lambda: weights.unitary_weight(
          self.lambda_init(self.make_rng("params"), (num,), self.param_dtype), k, k))
      lam = self.param("lam", nn.initializers.zeros, (num,), self.param_dtype)
      # The base is a constant of the forward pass: only λ carries gradients.
      return weights.rebased_unitary_weight(jax.lax.stop_gradient(base.value), lam), bias
    lam = self.param("lam", self.lambda_init, (num,), self.param_dtype)
    return weights.unitary_weight(lam, in_features, k), bias

  def matrix(self, in_features: int) -> jax.Array:
    """W, the complex (k, n) matrix, for n = ``in_features`` (the complex input size).

    Raises:
      ValueError: if `in_features` is not an integer ≥ 1 (flax raises if the stored
        ``lam`` does not have the size this n implies).
    """
    return self._weight_and_bias(weights.check_features(in_features, "in_features"))[0]

  def unitary(self) -> jax.Array:
    """The (n, n) complex matrix U(λ) of a square layer (input size n = ``features``)."""
    return self.matrix(self.features)

  def dense_params(self, in_features: int) -> dict:
    """W formed once, as the parameters of the `flax.linen.Dense` from `as_dense`.

    For inference: ``layer.apply(variables, n, method="dense_params")`` (jittable)
    forms W once; ``layer.as_dense().apply({"params": p}, x)`` then computes this
    layer's y with one matmul, no exponential. Complex layers: ``kernel`` complex
    (n, k) = Wᵀ, ``bias`` complex (k,); with ``real_pairs`` the real (2n, 2k) kernel
    [[Re Wᵀ, Im Wᵀ], [−Im Wᵀ, Re Wᵀ]] and the real (2k,) bias, for real [Re, Im] halves.

    Raises:
      ValueError: if `in_features` is not an integer ≥ 1 (flax's ScopeParamShapeError
        if the stored parameters do not have the size this n implies).
    """
    w, bias = self._weight_and_bias(weights.check_features(in_features, "in_features"))
    return weights.unitary_dense_params(w, bias, self.real_pairs)

  def as_dense(self) -> nn.Dense:
    """The `flax.linen.Dense` that applies `dense_params` (see there); HIGHEST precision."""
    dtype = algebra.check_real_dtype(self.param_dtype, "param_dtype")
    dtype = dtype if self.real_pairs else algebra.complex_dtype_for(dtype)
    return nn.Dense(self._dense_features(), use_bias=self.use_bias, dtype=dtype,
                    param_dtype=dtype, precision=jax.lax.Precision.HIGHEST, parent=None)

  def _dense_features(self) -> int:
    return weights.check_features(self.features) * (2 if self.real_pairs else 1)

  def __call__(self, x):
    """Applies W (and b). Raises ValueError if x's dtype or (at init) its last axis does
    not fit; after init, a last axis unlike the stored λ's n raises flax's
    ScopeParamShapeError."""
    n = weights.unitary_in_features(x, self.real_pairs)
    w, bias = self._weight_and_bias(n)
    return weights.apply_unitary(w, x, bias, self.real_pairs)


class OrthogonalLinear(nn.Module):
  """y = W(μ) x (+ b) on the last axis: real n -> k with W (k, n) a (co-)isometry.

  Parameters: ``mu`` real (nk − m(m+1)/2,), m = min(n, k) ((n(n−1)/2,) for k = n: W =
  `orthogonal_from_lambdas(mu)` in SO(n)); with ``use_bias``, ``bias`` real (k,). The
  matrix: ``layer.apply(variables, n, method="matrix")``; square: ``method="orthogonal"``.
  n is read from x at every call, and the count of μ is the same for n = k − 1 and
  n = k (both k(k−1)/2): variables initialised at one of the two and applied at the
  other are not detected, and give another W. `lie_unitary.nnx.OrthogonalLinear`
  stores n.

  Attributes:
    features: k, the output size, an integer ≥ 1.
    lambda_init: initializer of μ; default N(0, 1).
    param_dtype: float32 or float64; half precision raises ValueError when W is
      formed.
    use_bias: add a learned bias b.
    bias_init: initializer of the (k,) bias; default zeros.
    rebased: square layers only: W = W₀ · R(μ) (PyTorch's "trivialization"), the base
      W₀ real (n, n) in the variable collection `BASE_COLLECTION` (drawn at init as
      R(μ₀), μ₀ from ``lambda_init``: the same W as without it), μ starting at 0, where
      the exponential is cheapest; move the base with `lie_unitary.nn.rebase`.
  """
  features: int
  lambda_init: Initializer = nn.initializers.normal(stddev=1.0)
  param_dtype: Any = jnp.float32
  use_bias: bool = False
  bias_init: Initializer = nn.initializers.zeros
  rebased: bool = False

  @nn.compact
  def _weight_and_bias(self, in_features: int):
    k = weights.check_features(self.features)
    num = weights.num_orthogonal_weight_params(in_features, k)
    bias = self.param("bias", self.bias_init, (k,), self.param_dtype) if self.use_bias else None
    if self.rebased:
      weights.check_rebased(in_features, k, "OrthogonalLinear")
      base = self.variable(weights.BASE_COLLECTION, "base", lambda: weights.orthogonal_weight(
          self.lambda_init(self.make_rng("params"), (num,), self.param_dtype), k, k))
      mu = self.param("mu", nn.initializers.zeros, (num,), self.param_dtype)
      return weights.rebased_orthogonal_weight(jax.lax.stop_gradient(base.value), mu), bias
    mu = self.param("mu", self.lambda_init, (num,), self.param_dtype)
    return weights.orthogonal_weight(mu, in_features, k), bias

  def matrix(self, in_features: int) -> jax.Array:
    """W, the real (k, n) matrix, for n = ``in_features``.

    Raises:
      ValueError: if `in_features` is not an integer ≥ 1.
    """
    return self._weight_and_bias(weights.check_features(in_features, "in_features"))[0]

  def orthogonal(self) -> jax.Array:
    """The (n, n) real matrix R(μ) of a square layer (input size n = ``features``)."""
    return self.matrix(self.features)

  def dense_params(self, in_features: int) -> dict:
    """W formed once: ``{"kernel": Wᵀ (n, k), "bias": b (k,)}`` (no bias without
    ``use_bias``), the parameters of `as_dense`'s `flax.linen.Dense`.

    For inference: ``p = layer.apply(variables, n, method="dense_params")`` (jittable),
    then ``layer.as_dense().apply({"params": p}, x)`` is this layer's y, one matmul.

    Raises:
      ValueError: if `in_features` is not an integer ≥ 1 (flax's ScopeParamShapeError
        if the stored parameters do not have the size this n implies).
    """
    w, bias = self._weight_and_bias(weights.check_features(in_features, "in_features"))
    return weights.orthogonal_dense_params(w, bias)

  def as_dense(self) -> nn.Dense:
    """The `flax.linen.Dense` that applies `dense_params`; HIGHEST precision."""
    dtype = algebra.check_real_dtype(self.param_dtype, "param_dtype")
    return nn.Dense(weights.check_features(self.features), use_bias=self.use_bias,
                    dtype=dtype, param_dtype=dtype, precision=jax.lax.Precision.HIGHEST,
                    parent=None)

  def __call__(self, x):
    """Applies W (and b). Raises ValueError if x is complex or not (..., n) (at init);
    after init, a last axis unlike the stored μ's n raises flax's ScopeParamShapeError."""
    n = weights.orthogonal_in_features(x)
    w, bias = self._weight_and_bias(n)
    return weights.apply_orthogonal(w, x, bias)
