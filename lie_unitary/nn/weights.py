"""The weights of the unitary and orthogonal layers, shared by the linen and NNX layers.

A layer maps n = ``in_features`` to k = ``out_features``, y = W x with W (k, n): for
k ≥ n an ISOMETRY (WᴴW = I_n), W = the n columns of `semi_unitary_from_lambdas(λ, k, n)`;
for k < n a CO-ISOMETRY (WWᴴ = I_k), W = `semi_unitary_from_lambdas(λ, n, k)`ᵀ. The
coefficient count is that Stiefel manifold's dimension: 2nk − min(n, k)² (complex) or
nk − m(m+1)/2, m = min(n, k) (real); for k = n, W = U(λ) (R(μ)), the square layers.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import algebra
from lie_unitary import expm
from lie_unitary import stiefel
from lie_unitary.precision import matmul as mm

__all__ = ["BASE_COLLECTION", "apply_orthogonal", "check_rebased", "rebased_orthogonal_weight",
           "rebased_unitary_weight", "apply_unitary", "check_features", "orthogonal_dense_params",
           "unitary_dense_params", "num_orthogonal_weight_params",
           "num_unitary_weight_params", "orthogonal_in_features", "orthogonal_weight",
           "unitary_in_features", "unitary_weight"]


# The flax variable collection of a rebased layer's or cell's base W₀ (not "params").
BASE_COLLECTION = "lie_base"


def check_rebased(in_features: int, out_features: int, layer: str) -> int:
  """n, for a rebased layer, which must be square.

  Raises:
    ValueError: naming `layer`, if in_features ≠ out_features.
  """
  n, k = _sizes(in_features, out_features)
  if n != k:
    raise ValueError(
        f"{layer}(rebased=True) is for square layers (W = W₀ · expm(A), both n × n); this one "
        f"maps {n} -> {k}. Tall and wide layers are cheap without it (cost O(n·k²)).")
  return n


def rebased_orthogonal_weight(base, mu) -> jax.Array:
  """W = W₀ · R(μ), the trivialized square map: real (n, n) from a base W₀ (n, n) and μ.

  R(μ) by the "taylor" exponential (`lie_unitary.expm`): near μ = 0, where a rebased
  layer lives between rebasings, it costs a few products or none (μ = 0: R = I).
  Gradients reach μ only; hold W₀ constant (``jax.lax.stop_gradient``).

  Raises:
    ValueError: as `lie_unitary.orthogonal_from_lambdas`, or if base is not (n, n).
  """
  r = expm.orthogonal_from_lambdas(mu, method="taylor")
  return mm(_check_base(base, r), r)


def rebased_unitary_weight(base, lam) -> jax.Array:
  """W = W₀ · U(λ), complex (n, n) from a complex base W₀ (n, n) and λ (n²,); as
  `rebased_orthogonal_weight`.

  Raises:
    ValueError: as `lie_unitary.unitary_from_lambdas`, or if base is not (n, n).
  """
  u = expm.unitary_from_lambdas(lam, method="taylor")
  return mm(_check_base(base, u), u)


def _check_base(base, w):
  if jnp.shape(base)[-2:] != w.shape[-2:]:
    raise ValueError(f"the base must be {w.shape[-2:]} for these coefficients; got "
                     f"{jnp.shape(base)}.")
  return jnp.asarray(base).astype(w.dtype)


def check_features(features, what: str = "features") -> int:
  """Returns `features` as an int.

  Raises:
    ValueError: if it is not an integer ≥ 1.
  """
  if isinstance(features, bool) or not isinstance(features, (int, np.integer)) or features < 1:
    raise ValueError(f"{what} must be an integer ≥ 1; got {features!r}.")
  return int(features)


def _sizes(in_features, out_features) -> tuple[int, int]:
  return check_features(in_features, "in_features"), check_features(out_features, "out_features")


def num_unitary_weight_params(in_features: int, out_features: int) -> int:
  """2nk − min(n, k)² real coefficients of a complex (k, n) (co-)isometry; n² if k = n.

  Raises:
    ValueError: if either size is not an integer ≥ 1.
  """
  n, k = _sizes(in_features, out_features)
  return stiefel.num_semi_unitary_params(max(n, k), min(n, k))


def num_orthogonal_weight_params(in_features: int, out_features: int) -> int:
  """nk − m(m+1)/2, m = min(n, k), coefficients of a real (k, n) (co-)isometry.

  Raises:
    ValueError: if either size is not an integer ≥ 1.
  """
  n, k = _sizes(in_features, out_features)
  return stiefel.num_semi_orthogonal_params(max(n, k), min(n, k))


def unitary_weight(lam, in_features: int, out_features: int) -> jax.Array:
  """W(λ), the complex (k, n) isometry (k ≥ n) or co-isometry (k < n).

  Args:
    lam: real array (..., `num_unitary_weight_params(n, k)`), float32 or float64
      (integers promoted to the default float).
    in_features: n.
    out_features: k.

  Returns:
    Complex array (..., k, n) (complex64 for float32 λ, complex128 for float64).

  Raises:
    ValueError: for a size that is not an integer ≥ 1, complex or half-precision λ
      (float16, bfloat16), or a wrong last axis.
  """
  n, k = _sizes(in_features, out_features)
  if k >= n:
    return stiefel.semi_unitary_from_lambdas(lam, k, n)
  return jnp.matrix_transpose(stiefel.semi_unitary_from_lambdas(lam, n, k))


def orthogonal_weight(mu, in_features: int, out_features: int) -> jax.Array:
  """W(μ), the real (k, n) isometry (k ≥ n) or co-isometry (k < n).

  Args:
    mu: real array (..., `num_orthogonal_weight_params(n, k)`), float32 or float64
      (integers promoted to the default float).
    in_features: n.
    out_features: k.

  Returns:
    Real array (..., k, n) of μ's (float) dtype.

  Raises:
    ValueError: for a size that is not an integer ≥ 1, complex or half-precision μ
      (float16, bfloat16), or a wrong last axis.
  """
  n, k = _sizes(in_features, out_features)
  if k >= n:
    return stiefel.semi_orthogonal_from_lambdas(mu, k, n)
  return jnp.matrix_transpose(stiefel.semi_orthogonal_from_lambdas(mu, n, k))


def _check_not_half(x, layer: str) -> None:
  """Half-precision input is refused, not computed in float32 behind the caller's back."""
  if jnp.issubdtype(x.dtype, jnp.floating):
    algebra.check_real_dtype(x.dtype, f"{layer}'s input dtype")


def unitary_in_features(x, real_pairs: bool, layer: str = "UnitaryLinear") -> int:
  """n, the complex input size: x's last axis (complex x) or half of it (``real_pairs``).

  Raises:
    ValueError: naming `layer`, for real x without ``real_pairs``, complex x with it,
      an odd last axis with it, a scalar x, half-precision x, or a real_pairs that is
      not a bool.
  """
  if not isinstance(real_pairs, (bool, np.bool_)):  # "no" would read as True
    raise ValueError(f"{layer}'s real_pairs must be a bool; got {real_pairs!r}.")
  x = jnp.asarray(x)
  if x.ndim < 1:
    raise ValueError(f"{layer} expects input (..., features); got a scalar, {x.shape=}.")
  _check_not_half(x, layer)
  if real_pairs:
    if jnp.iscomplexobj(x) or x.shape[-1] % 2 or x.shape[-1] == 0:
      raise ValueError(
          f"{layer} with real_pairs=True expects REAL input (..., 2n) holding [Re x, Im x] "
          f"(an even, non-zero last axis); got {x.shape=}, {x.dtype=}.")
    return x.shape[-1] // 2
  if not jnp.iscomplexobj(x):
    raise ValueError(
        f"{layer} expects complex input (..., n); got {x.dtype=}. For real [Re, Im] "
        "pairs set real_pairs=True; for real vectors use OrthogonalLinear.")
  if x.shape[-1] == 0:
    raise ValueError(f"{layer} expects a non-empty last axis; got {x.shape=}.")
  return x.shape[-1]


def orthogonal_in_features(x, layer: str = "OrthogonalLinear") -> int:
  """n, the real input size (x's last axis).

  Raises:
    ValueError: naming `layer`, for complex x, a scalar, an empty last axis, or
      half-precision x.
  """
  x = jnp.asarray(x)
  if jnp.iscomplexobj(x) or x.ndim < 1 or x.shape[-1] == 0:
    raise ValueError(f"{layer} expects real input (..., n), n ≥ 1; got {x.shape=}, {x.dtype=}.")
  _check_not_half(x, layer)
  return x.shape[-1]


def _check_bias(bias, size: int):
  bias = jnp.asarray(bias)
  if bias.shape != (size,) or jnp.iscomplexobj(bias):
    raise ValueError(f"bias must be real with shape ({size},); got {bias.shape=}, {bias.dtype=}.")
  return bias


def _add_bias(y, bias):  # explicit unit axes: works under jax_numpy_rank_promotion='raise'
  return y + bias.reshape((1,) * (y.ndim - 1) + bias.shape).astype(y.dtype)


def apply_unitary(w, x, bias=None, real_pairs: bool = False) -> jax.Array:
  """y = W x (+ b) on the last axis, at HIGHEST matmul precision.

  Args:
    w: complex (k, n).
    x: complex (..., n); or real (..., 2n) holding [Re x, Im x] if ``real_pairs``
      (integers are promoted to W's real dtype; float32 / float64 promote with it).
    bias: None, or real (2k,) holding [Re b, Im b].
    real_pairs: read and write real [Re, Im] halves.

  Returns:
    Complex (..., k), the promoted dtype of W and x; real (..., 2k) [Re y, Im y] if
    ``real_pairs``.

  Raises:
    ValueError: as `unitary_in_features`, if x's size is not W's n, or if the bias is
      not real (2k,).
  """
  n = unitary_in_features(x, real_pairs)
  if w.ndim != 2 or w.shape[-1] != n:
    raise ValueError(f"input has {n} (complex) features but the weight is {w.shape}.")
  k = w.shape[0]
  if bias is not None:
    bias = _check_bias(bias, 2 * k)
  x = jnp.asarray(x)
  if real_pairs:
    part = jnp.finfo(w.dtype).dtype  # W's real dtype: integer pairs are promoted to it,
    if jnp.issubdtype(x.dtype, jnp.floating):  # float ones promote with it, as complex x
      part = jnp.promote_types(part, x.dtype)
    x = jax.lax.complex(x[..., :n].astype(part), x[..., n:].astype(part))
  y = mm(x, w.T)
  if real_pairs:
    y = jnp.concatenate([jnp.real(y), jnp.imag(y)], axis=-1)
    return y if bias is None else _add_bias(y, bias)
  if bias is None:
    return y
  return _add_bias(y, jax.lax.complex(bias[:k], bias[k:]))


def apply_orthogonal(w, x, bias=None) -> jax.Array:
  """y = W x (+ b) on the last axis, at HIGHEST matmul precision.

  Args:
    w: real (k, n).
    x: real (..., n).
    bias: None, or real (k,).

  Returns:
    Real (..., k).

  Raises:
    ValueError: as `orthogonal_in_features`, if x's size is not W's n, or if the bias
      is not real (k,).
  """
  n = orthogonal_in_features(x)
  if w.ndim != 2 or w.shape[-1] != n:
    raise ValueError(f"input has {n} features but the weight is {w.shape}.")
  if bias is not None:
    bias = _check_bias(bias, w.shape[0])
  y = mm(jnp.asarray(x), w.T)
  return y if bias is None else _add_bias(y, bias)


def unitary_dense_params(w, bias=None, real_pairs: bool = False) -> dict:
  """The parameters of a dense layer (y = x @ kernel + bias) that computes `apply_unitary`.

  Args:
    w: complex (k, n).
    bias: None, or real (2k,) holding [Re b, Im b].
    real_pairs: give the real (2n, 2k) kernel [[Re Wᵀ, Im Wᵀ], [−Im Wᵀ, Re Wᵀ]] and the
      real (2k,) bias, which act on [Re x, Im x]; else the complex (n, k) kernel Wᵀ and
      the complex (k,) bias.

  Returns:
    ``{"kernel": ..., "bias": ...}``, without "bias" when `bias` is None.

  Raises:
    ValueError: if `w` is not a matrix or the bias is not real (2k,).
  """
  if jnp.ndim(w) != 2:
    raise ValueError(f"w must be a (k, n) matrix; got {jnp.shape(w)=}.")
  k = w.shape[0]
  if bias is not None:
    bias = _check_bias(bias, 2 * k)
  w_t = jnp.matrix_transpose(w)
  if real_pairs:
    re, im = jnp.real(w_t), jnp.imag(w_t)
    kernel = jnp.concatenate([jnp.concatenate([re, im], axis=-1),
                              jnp.concatenate([-im, re], axis=-1)], axis=-2)
  else:
    kernel = w_t
    bias = None if bias is None else jax.lax.complex(bias[:k], bias[k:]).astype(w.dtype)
  return {"kernel": kernel} if bias is None else {"kernel": kernel, "bias": bias}


def orthogonal_dense_params(w, bias=None) -> dict:
  """``{"kernel": Wᵀ (n, k), "bias": b (k,)}`` (no "bias" if None): `apply_orthogonal`
  as a dense layer, y = x @ kernel + bias.

  Raises:
    ValueError: if `w` is not a matrix or the bias is not real (k,).
  """
  if jnp.ndim(w) != 2:
    raise ValueError(f"w must be a (k, n) matrix; got {jnp.shape(w)=}.")
  kernel = jnp.matrix_transpose(w)
  if bias is None:
    return {"kernel": kernel}
  return {"kernel": kernel, "bias": _check_bias(bias, w.shape[0]).astype(w.dtype)}
