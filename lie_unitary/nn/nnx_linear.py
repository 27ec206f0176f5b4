"""Flax NNX layers that apply a learned unitary or orthogonal map, of any shape.

The NNX twins of `lie_unitary.nn.linear` (the same maths, `lie_unitary.nn.weights`), with
both sizes given at construction as `flax.nnx.Linear`. Only API that flax 0.10 and later
share is used (`nnx.Param`, ``variable[...]``).
"""

from __future__ import annotations

from typing import Any
from typing import Callable

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import algebra
from lie_unitary import principal_branch
from lie_unitary.nn import weights

__all__ = ["Base", "OrthogonalLinear", "UnitaryLinear"]

Initializer = Callable[..., jax.Array]


class Base(nnx.Variable):
  """The base W₀ of a rebased square layer: state, not a parameter (an optimizer over
  `nnx.Param` leaves it alone; only `rebase` moves it)."""


def _check_rngs(rngs, layer: str) -> None:
  if not isinstance(rngs, nnx.Rngs):
    raise ValueError(f"{layer} draws its parameters from rngs, an nnx.Rngs (e.g. "
                     f"nnx.Rngs(0)); got {rngs!r}.")


def _rebased_parts(in_features, out_features, rebased, layer, draw, num, param_dtype):
  """(coefficients, base or None): the base drawn as the map at ``draw``, coefficients 0."""
  coeffs = draw()
  if not rebased:
    return nnx.Param(coeffs), None
  n = weights.check_rebased(in_features, out_features, layer)
  to_matrix = weights.orthogonal_weight if layer == "OrthogonalLinear" else weights.unitary_weight
  return nnx.Param(jnp.zeros((num,), param_dtype)), Base(to_matrix(coeffs, n, n))


def _rebased_matrix(layer, coeffs):
  weight = (weights.rebased_orthogonal_weight if isinstance(layer, OrthogonalLinear)
            else weights.rebased_unitary_weight)
  return weight(jax.lax.stop_gradient(layer.base[...]), coeffs)


def _rebase(layer, name: str) -> None:
  if layer.base is None:
    raise ValueError(f"rebase() is for layers made with rebased=True; this "
                     f"{type(layer).__name__} is not.")
  coeffs = getattr(layer, name)[...]
  layer.base = Base(principal_branch.reunitarize(layer.matrix()))
  setattr(layer, name, nnx.Param(jnp.zeros_like(coeffs)))


def _linear_from(params: dict, precision) -> nnx.Linear:
  """An `nnx.Linear` whose kernel (and bias) are the given arrays."""
  kernel = params["kernel"]
  # The arrays come in through the initializers: nothing is drawn, nothing assigned
  # (in-place assignment to a Variable differs across flax versions).
  bias = params.get("bias")
  return nnx.Linear(kernel.shape[0], kernel.shape[1], use_bias=bias is not None,
                    dtype=kernel.dtype, param_dtype=kernel.dtype, precision=precision,
                    kernel_init=lambda *_: kernel,
                    bias_init=lambda *_: bias,
                    rngs=nnx.Rngs(0))


class UnitaryLinear(nnx.Module):
  """y = W(λ) x (+ b): complex n = ``in_features`` -> k = ``out_features``.

  Input is complex (..., n), or real (..., 2n) [Re x, Im x] with ``real_pairs``
  (integers promoted; output real (..., 2k)). W (k, n) is formed once per call and
  applied at HIGHEST precision.

  Attributes:
    lam: `nnx.Param`, real (2nk − min(n, k)²,); (n²,) for k = n.
    bias: `nnx.Param`, real (2k,) holding [Re b, Im b], or None without ``use_bias``.
    in_features, out_features, real_pairs: as given.
  """

  def __init__(self, in_features: int, out_features: int, *, rngs: nnx.Rngs,
               real_pairs: bool = False, use_bias: bool = False,
               lambda_init: Initializer = jax.nn.initializers.normal(stddev=1.0),
               bias_init: Initializer = jax.nn.initializers.zeros,
               param_dtype: Any = jnp.float32, rebased: bool = False):
    """Creates λ (and b) from ``rngs.params()``.

    Args:
      in_features: n, the complex input size, an integer ≥ 1.
      out_features: k, the complex output size, an integer ≥ 1.
      rngs: the `nnx.Rngs` that draws the parameters.
      real_pairs: read and write real [Re, Im] halves instead of complex arrays.
      use_bias: add a learned complex bias b.
      lambda_init: initializer of λ, called (key, shape, dtype); default N(0, 1).
      bias_init: initializer of the real (2k,) bias; default zeros.
      param_dtype: float32 (W complex64) or float64 (W complex128).
      rebased: square layers only: W = W₀ · U(λ), the base W₀ a `Base` variable drawn
        as U(λ₀) with λ₀ from ``lambda_init`` (the same W as without it), λ starting at
        0, where the exponential is cheapest; `rebase` moves the base to W.

    Raises:
      ValueError: if a size is not an integer ≥ 1, param_dtype is not float32 or
        float64 (half precision included), rngs is not an `nnx.Rngs`, real_pairs not
        a bool, or the layer is rebased and not square.
    """
    _check_rngs(rngs, "UnitaryLinear")
    self.in_features = weights.check_features(in_features, "in_features")
    self.out_features = weights.check_features(out_features, "out_features")
    param_dtype = algebra.check_real_dtype(param_dtype, "param_dtype")
    if not isinstance(real_pairs, (bool, np.bool_)):  # "no" would read as True
      raise ValueError(f"real_pairs must be a bool; got {real_pairs!r}.")
    self.real_pairs = bool(real_pairs)
    num = weights.num_unitary_weight_params(self.in_features, self.out_features)
    self.lam, self.base = _rebased_parts(
        self.in_features, self.out_features, rebased, "UnitaryLinear",
        lambda: lambda_init(rngs.params(), (num,), param_dtype), num, param_dtype)
    self.bias = (nnx.Param(bias_init(rngs.params(), (2 * self.out_features,), param_dtype))
                 if use_bias else None)

  def matrix(self) -> jax.Array:
    """W, the complex (k, n) matrix (W₀ · U(λ) when rebased)."""
    if self.base is not None:
      return _rebased_matrix(self, self.lam[...])
    return weights.unitary_weight(self.lam[...], self.in_features, self.out_features)

  def rebase(self) -> None:
    """Rebased layers: W₀ ← W (re-orthonormalized), λ ← 0, in place; W is unchanged.

    Reset the optimizer's moments of λ after it: they refer to the old chart.

    Raises:
      ValueError: if the layer is not rebased.
    """
    _rebase(self, "lam")

  def dense_params(self) -> dict:
    """W formed once, as the parameters of `as_linear`'s `nnx.Linear` (jittable).

    ``{"kernel": ..., "bias": ...}`` (no "bias" without ``use_bias``): the complex (n, k)
    kernel Wᵀ and complex (k,) bias; with ``real_pairs`` the real (2n, 2k) kernel
    [[Re Wᵀ, Im Wᵀ], [−Im Wᵀ, Re Wᵀ]] and real (2k,) bias acting on [Re x, Im x].
    """
    bias = None if self.bias is None else self.bias[...]
    return weights.unitary_dense_params(self.matrix(), bias, self.real_pairs)

  def as_linear(self) -> nnx.Linear:
    """An `nnx.Linear` holding `dense_params` (HIGHEST precision): this layer's y for
    inference with one matmul and no exponential. A copy: training it leaves λ alone."""
    return _linear_from(self.dense_params(), jax.lax.Precision.HIGHEST)

  def unitary(self) -> jax.Array:
    """W of a square layer, U(λ) (n, n).

    Raises:
      ValueError: if in_features ≠ out_features.
    """
    if self.in_features != self.out_features:
      raise ValueError(
          f"unitary() is for square layers; this one maps {self.in_features} -> "
          f"{self.out_features}: use matrix().")
    return self.matrix()

  def __call__(self, x) -> jax.Array:
    """Applies W (and b). Raises ValueError if x's dtype or last axis does not fit."""
    n = weights.unitary_in_features(x, self.real_pairs)
    if n != self.in_features:
      expected = (f"real (..., {2 * self.in_features}) [Re, Im] pairs" if self.real_pairs
                  else f"complex (..., {self.in_features})")
      raise ValueError(f"UnitaryLinear expects {expected} input; got {jnp.shape(x)=}.")
    bias = None if self.bias is None else self.bias[...]
    return weights.apply_unitary(self.matrix(), x, bias, self.real_pairs)


class OrthogonalLinear(nnx.Module):
  """y = W(μ) x (+ b): real n = ``in_features`` -> k = ``out_features``.

  Attributes:
    mu: `nnx.Param`, real (nk − m(m+1)/2,), m = min(n, k); (n(n−1)/2,) for k = n.
    bias: `nnx.Param`, real (k,), or None without ``use_bias``.
    in_features, out_features: as given.
  """

  def __init__(self, in_features: int, out_features: int, *, rngs: nnx.Rngs,
               use_bias: bool = False,
               lambda_init: Initializer = jax.nn.initializers.normal(stddev=1.0),
               bias_init: Initializer = jax.nn.initializers.zeros,
               param_dtype: Any = jnp.float32, rebased: bool = False):
    """Creates μ (and b) from ``rngs.params()``.

    Args:
      in_features: n, an integer ≥ 1.
      out_features: k, an integer ≥ 1.
      rngs: the `nnx.Rngs` that draws the parameters.
      use_bias: add a learned bias b.
      lambda_init: initializer of μ, called (key, shape, dtype); default N(0, 1).
      bias_init: initializer of the (k,) bias; default zeros.
      param_dtype: float32 or float64.
      rebased: square layers only: W = W₀ · R(μ), the base W₀ a `Base` variable drawn
        as R(μ₀) with μ₀ from ``lambda_init`` (the same W as without it), μ starting at
        0, where the exponential is cheapest; `rebase` moves the base to W.

    Raises:
      ValueError: if a size is not an integer ≥ 1, param_dtype is not float32 or
        float64 (half precision included), rngs is not an `nnx.Rngs`, or the layer is
        rebased and not square.
    """
    _check_rngs(rngs, "OrthogonalLinear")
    self.in_features = weights.check_features(in_features, "in_features")
    self.out_features = weights.check_features(out_features, "out_features")
    param_dtype = algebra.check_real_dtype(param_dtype, "param_dtype")
    num = weights.num_orthogonal_weight_params(self.in_features, self.out_features)
    self.mu, self.base = _rebased_parts(
        self.in_features, self.out_features, rebased, "OrthogonalLinear",
        lambda: lambda_init(rngs.params(), (num,), param_dtype), num, param_dtype)
    self.bias = (nnx.Param(bias_init(rngs.params(), (self.out_features,), param_dtype))
                 if use_bias else None)

  def matrix(self) -> jax.Array:
    """W, the real (k, n) matrix (W₀ · R(μ) when rebased)."""
    if self.base is not None:
      return _rebased_matrix(self, self.mu[...])
    return weights.orthogonal_weight(self.mu[...], self.in_features, self.out_features)

  def rebase(self) -> None:
    """Rebased layers: W₀ ← W (re-orthonormalized), μ ← 0, in place; W is unchanged.

    Reset the optimizer's moments of μ after it: they refer to the old chart.

    Raises:
      ValueError: if the layer is not rebased.
    """
    _rebase(self, "mu")

  def dense_params(self) -> dict:
    """W formed once: ``{"kernel": Wᵀ (n, k), "bias": b (k,)}`` (no "bias" without
    ``use_bias``), the parameters of `as_linear`'s `nnx.Linear` (jittable)."""
    bias = None if self.bias is None else self.bias[...]
    return weights.orthogonal_dense_params(self.matrix(), bias)

  def as_linear(self) -> nnx.Linear:
    """An `nnx.Linear` holding `dense_params` (HIGHEST precision): this layer's y for
    inference with one matmul and no exponential. A copy: training it leaves μ alone."""
    return _linear_from(self.dense_params(), jax.lax.Precision.HIGHEST)

  def orthogonal(self) -> jax.Array:
    """W of a square layer, R(μ) (n, n).

    Raises:
      ValueError: if in_features ≠ out_features.
    """
    if self.in_features != self.out_features:
      raise ValueError(
          f"orthogonal() is for square layers; this one maps {self.in_features} -> "
          f"{self.out_features}: use matrix().")
    return self.matrix()

  def __call__(self, x) -> jax.Array:
    """Applies W (and b). Raises ValueError if x is complex or not (..., in_features)."""
    n = weights.orthogonal_in_features(x)
    if n != self.in_features:
      raise ValueError(
          f"OrthogonalLinear expects real input (..., {self.in_features}); got {jnp.shape(x)=}.")
    bias = None if self.bias is None else self.bias[...]
    return weights.apply_orthogonal(self.matrix(), x, bias)
