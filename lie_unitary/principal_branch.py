"""Keeping the coefficients λ of U = expm(L(λ)) where their gradients are alive.

The derivative of the exponential map at L = L(λ), written in the eigenbasis of
iL = W diag(θ) Wᴴ and left-translated by U, multiplies the (i, j) entry of the
tangent by (1 − e^{iΔ_ij}) / (−iΔ_ij), of modulus |sinc(Δ_ij / 2)| with
Δ_ij = θ_i − θ_j and sinc(x) = sin(x)/x. It vanishes when a gap reaches 2π and is
below 2/|Δ| beyond. λ ~ N(0, 1), the paper's init (§3.3, §4), gives iL a spectrum
of radius about 2√(2n) (a Wigner semicircle: the off-diagonal entries of iL have
E|H_ij|² = 2), so at n = 64 the gaps span ±45 and most directions of u(n) reach U
only through small sinc factors. This module measures that and offers three ways out,
all pure functions of arrays:

- **Init**: `init_lambdas` with scheme "zeros" (U = I) or "haar" (the principal
  logarithm of a Haar-random unitary: U is Haar-distributed, as N(0, 1) gives for
  large n, but every |θ| ≤ π).
- **Re-centring**: `principal_lambdas(λ)` returns the coefficients of the principal
  logarithm of U(λ) (θ wrapped into [−π, π)): the same U, gaps below 2π.
- **Re-basing** (dynamic trivialization, Lezcano-Casado 2019): U = U₀ · expm(L(λ))
  with U₀ held as state, and `rebase(U₀, λ) = (U₀ · U(λ), 0)` every K steps. At
  λ = 0 every sinc factor is 1: the step is a Riemannian gradient step on U(n).

`spectrum_stats` gives the diagnostics (spread of θ, smallest |sinc(Δ/2)|, share of
gaps beyond π) and `reset_optimizer_state` is the rule for the optimizer's moments
when the coordinates change under it. docs/principal_branch.md has the measurements.
"""

from __future__ import annotations

import math
from typing import Any
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from lie_unitary import algebra
from lie_unitary import expm
from lie_unitary import generators
from lie_unitary import logm
from lie_unitary.precision import matmul as mm

__all__ = ["INIT_SCHEMES", "REFRESH_STATES", "SpectrumStats", "basis_norms", "init_lambdas",
           "lambda_initializer", "principal_lambdas", "rebase", "rebased_unitary",
           "reset_optimizer_state", "reunitarize", "spectrum", "spectrum_stats", "wrap_phases"]

INIT_SCHEMES = ("normal", "zeros", "haar")
# What a refresh of the chart does to the optimizer's moments: keep them, or reset
# them (`reset_optimizer_state`).
REFRESH_STATES = ("keep", "reset")


class SpectrumStats(NamedTuple):
  """Where the spectrum θ = eigvalsh(iL(λ)) sits (scalars, λ's real dtype).

  Attributes:
    spread: max θ − min θ (the largest gap |Δ|).
    max_abs_phase: max |θ|; above π the chart is off the principal branch.
    min_sinc: min over pairs i < j of |sinc(Δ_ij / 2)| (1 for n = 1), the weakest
      direction's gain in the derivative of expm.
    wide_share: share of pairs i < j with |Δ_ij| > π (0 for n = 1).
  """
  spread: jax.Array
  max_abs_phase: jax.Array
  min_sinc: jax.Array
  wide_share: jax.Array


def spectrum(lam) -> jax.Array:
  """θ = eigvalsh(iL(λ)), ascending: U(λ) has eigenvalues e^{−iθ}.

  Args:
    lam: real array (..., n²), float32 or float64.

  Returns:
    Real array (..., n) of λ's dtype.

  Raises:
    ValueError: if `lam` is complex or half precision, or its last axis is not a
      perfect square.
  """
  return jnp.linalg.eigvalsh(algebra.lambdas_to_hermitian(algebra.check_lambdas(lam)))


def _stats_from_phases(theta) -> SpectrumStats:
  n = theta.shape[-1]
  gaps = theta[..., :, None] - theta[..., None, :]
  upper = jnp.triu(jnp.ones((n, n), bool), 1)
  # jnp.sinc is sin(πx)/(πx): sinc(Δ/2) unnormalised is jnp.sinc(Δ/(2π)).
  gain = jnp.where(upper, jnp.abs(jnp.sinc(gaps / (2 * math.pi))), 1.0)
  num_pairs = max(n * (n - 1) // 2, 1)
  wide = jnp.sum(jnp.where(upper, jnp.abs(gaps) > math.pi, False), axis=(-2, -1))
  return SpectrumStats(
      spread=theta[..., -1] - theta[..., 0],
      max_abs_phase=jnp.max(jnp.abs(theta), axis=-1),
      min_sinc=jnp.min(gain, axis=(-2, -1)).astype(theta.dtype),
      wide_share=(wide / num_pairs).astype(theta.dtype))


def spectrum_stats(lam) -> SpectrumStats:
  """`SpectrumStats` of U(λ)'s chart: one eigvalsh of an n×n Hermitian matrix.

  Args:
    lam: real array (..., n²), float32 or float64; leading axes are batch axes.

  Returns:
    `SpectrumStats` whose fields have shape (...) and λ's dtype.

  Raises:
    ValueError: as `spectrum`.
  """
  return _stats_from_phases(spectrum(lam))


def wrap_phases(theta) -> jax.Array:
  """θ mapped into [−π, π) by adding multiples of 2π.

  Args:
    theta: real array of any shape; integers are promoted to the default float dtype.

  Returns:
    Real array of θ's shape and (floating) dtype.

  Raises:
    ValueError: for a complex θ.
  """
  theta = jnp.asarray(theta)
  if jnp.iscomplexobj(theta):
    raise ValueError(f"θ must be real; got dtype {theta.dtype}.")
  return theta - (2 * math.pi) * jnp.floor((theta + math.pi) / (2 * math.pi))


def principal_lambdas(lam) -> jax.Array:
  """Coefficients of the principal logarithm of U(λ): the same U, every |θ| ≤ π.

  One eigh of iL(λ) = W diag(θ) Wᴴ, θ wrapped into [−π, π), and iL rebuilt from it;
  no eigendecomposition of a non-normal matrix. Not meant to be differentiated.

  Args:
    lam: real array (..., n²), float32 or float64.

  Returns:
    Real array like `lam`; U(result) = U(lam) up to rounding (a few ulps times the
    spread of θ).

  Raises:
    ValueError: if `lam` is complex or half precision, or its last axis is not a
      perfect square.
  """
  lam = algebra.check_lambdas(lam)
  theta, w = jnp.linalg.eigh(algebra.lambdas_to_hermitian(lam))
  wrapped = wrap_phases(theta)
  # Coordinates whose spectrum is already principal are returned bit for bit.
  h = mm(w * wrapped.astype(w.dtype)[..., None, :], jnp.conj(jnp.matrix_transpose(w)))
  new = algebra.skew_hermitian_to_lambdas(-1j * h).astype(lam.dtype)
  inside = jnp.all(wrapped == theta, axis=-1, keepdims=True)
  return jnp.where(inside, lam, new)


def init_lambdas(key, n: int, scheme: str = "normal", std: float = 1.0,
                 dtype=jnp.float32) -> jax.Array:
  """Initial coefficients λ (n²,) of U(n).

  Args:
    key: PRNG key.
    n: matrix size, a positive integer (static).
    scheme: "normal" (N(0, std²), the paper's with std = 1), "zeros" (U = I) or
      "haar" (the principal logarithm of a Haar-random unitary, so |θ| ≤ π;
      `std` unused).
    std: standard deviation for "normal", ≥ 0.
    dtype: float32 or float64.

  Returns:
    Real array (n²,) of `dtype`.

  Raises:
    ValueError: an unknown scheme, n not a positive integer, a negative std or a
      dtype that is not float32/float64.
  """
  if scheme not in INIT_SCHEMES:
    raise ValueError(f"unknown init scheme {scheme!r}; expected one of {INIT_SCHEMES}.")
  n = algebra.check_positive_int(n)
  std = algebra.check_finite_real(std, "std")
  dtype = algebra.check_real_dtype(dtype, "dtype")
  if scheme == "normal":
    return std * jax.random.normal(key, (n * n,), dtype)
  if scheme == "zeros":
    return jnp.zeros((n * n,), dtype)
  u = generators.random_unitary(key, n, "haar", algebra.complex_dtype_for(dtype))
  return logm.lambdas_from_unitary(u).astype(dtype)


def lambda_initializer(scheme: str = "normal", std: float = 1.0) -> Callable[..., jax.Array]:
  """`init_lambdas` as a flax initializer ``(key, shape, dtype) -> λ`` for shape (n²,).

  Raises:
    ValueError: at once for an unknown scheme or a bad std; when called, for a
      shape that is not (n²,).
  """
  if scheme not in INIT_SCHEMES:
    raise ValueError(f"unknown init scheme {scheme!r}; expected one of {INIT_SCHEMES}.")
  std = algebra.check_finite_real(std, "std")

  def initializer(key, shape, dtype=jnp.float32):
    if len(shape) != 1:
      raise ValueError(f"λ must have shape (n²,); got {shape}.")
    return init_lambdas(key, algebra.n_from_num_lambdas(shape[0]), scheme, std, dtype)

  return initializer


def basis_norms(n: int, dtype=jnp.float32) -> jax.Array:
  """‖T_j‖_F of the paper's generators: 1 on the diagonal ones, √2 on the others.

  Coordinates λ_j / ‖T_j‖ are orthonormal ones: a step of the same size in every
  coordinate then moves U by the same Frobenius distance, as a step on the entries
  of a free matrix does (used by the ``lie_rebased_orthonormal`` parametrization).

  Args:
    n: matrix size, a positive integer.
    dtype: float32 or float64.

  Returns:
    Real array (n²,) in the order of `algebra.basis(n)`.

  Raises:
    ValueError: n not a positive integer, or a dtype other than float32 and float64.
  """
  n = algebra.check_positive_int(n)
  dtype = algebra.check_real_dtype(dtype)  # an integer dtype would truncate √2 to 1
  # The diagonal coefficients come first (`algebra.basis`), the n(n-1) others after.
  return jnp.concatenate([jnp.ones((n,), dtype),
                          jnp.full((n * (n - 1),), math.sqrt(2.0), dtype)])


def reunitarize(u) -> jax.Array:
  """One Newton–Schulz step of the polar factor: U (3I − UᴴU) / 2.

  For ‖UᴴU − I‖ = ε it returns a matrix with error O(ε²): two matmuls that keep a
  product of many unitary factors unitary in float32.

  Args:
    u: complex (or real) array (..., n, n), nearly unitary (not checked: far from
      unitary, one step does not bring it closer).

  Returns:
    Array of the same shape and dtype (integers: the default float dtype).

  Raises:
    ValueError: if `u` is not square, or half precision (float16, bfloat16).
  """
  u = algebra.as_float_square(u, "u")
  gram = mm(jnp.conj(jnp.matrix_transpose(u)), u)
  # Broadcast explicitly: batch axes must not rely on implicit rank promotion.
  eye = jnp.broadcast_to(jnp.eye(u.shape[-1], dtype=u.dtype), gram.shape)
  return mm(u, 1.5 * eye - 0.5 * gram)


def rebased_unitary(base, lam, method: str = "auto") -> jax.Array:
  """U = U₀ · U(λ): the dynamic trivialization of U(n) around the base U₀.

  Gradients flow through λ only if `base` is held constant (pass it as state).

  Args:
    base: complex array (..., n, n), unitary, of λ's precision (complex64 for float32).
    lam: real array (..., n²), float32 or float64, of the matching precision.
    method: "eigh", "pade", "taylor" or "auto", as `lie_unitary.unitary_from_lambdas`.

  Returns:
    Complex array (..., n, n), the batch axes of base and λ broadcast.

  Raises:
    ValueError: as `unitary_from_lambdas`, if base is not (..., n, n) of λ's precision
      (half precision included), or if base's batch axes and λ's do not broadcast.
  """
  u = expm.unitary_from_lambdas(lam, method=method)
  base = algebra.as_float_square(base, "base")
  if jnp.finfo(base.dtype).dtype != jnp.finfo(u.dtype).dtype:  # not cast in silence
    raise ValueError(f"base must have λ's precision ({u.dtype}, or real "
                     f"{jnp.finfo(u.dtype).dtype}); got {base.dtype}.")
  if jnp.shape(base)[-2:] != u.shape[-2:]:
    raise ValueError(f"base must be (..., {u.shape[-1]}, {u.shape[-1]}) for λ of length "
                     f"{jnp.shape(lam)[-1]}; got {jnp.shape(base)}.")
  try:
    jnp.broadcast_shapes(jnp.shape(base)[:-2], u.shape[:-2])
  except ValueError:
    raise ValueError(f"base's batch axes {jnp.shape(base)[:-2]} and λ's {u.shape[:-2]} do not "
                     "broadcast.") from None
  return mm(jnp.asarray(base).astype(u.dtype), u)


def rebase(base, lam, method: str = "auto") -> tuple[jax.Array, jax.Array]:
  """Moves the base to the current point: (U₀ · U(λ), λ = 0), the same U.

  The new base is re-unitarized (`reunitarize`) so that rounding does not
  accumulate over many re-basings.

  Args:
    base: complex array (..., n, n), unitary.
    lam: real array (..., n²).
    method: as `rebased_unitary`.

  Returns:
    (new base: base and λ's batch axes broadcast, λ's complex dtype; zeros like λ).

  Raises:
    ValueError: as `rebased_unitary`.
  """
  new_base = reunitarize(rebased_unitary(base, lam, method))
  return new_base, jnp.zeros_like(algebra.check_lambdas(lam))


def reset_optimizer_state(optimizer: optax.GradientTransformation, opt_state: Any, params: Any,
                          where: Any = None) -> Any:
  """The optimizer state with the per-parameter statistics of `where` re-initialised.

  The rule for a change of coordinates (re-centring, re-basing): moment estimates
  (RMSProp's mean square, momentum) of the chosen parameters restart from what
  `optimizer.init` gives; everything else, step counters (and so learning-rate
  schedules) included, is kept.

  Args:
    optimizer: the optax transformation whose state this is.
    opt_state: its state for `params`.
    params: the parameters (after the change of coordinates).
    where: a pytree like `params` of Python or array booleans (True: reset this
      leaf's statistics); None resets every parameter's.

  Returns:
    A state of the same structure.

  Raises:
    ValueError: if `optimizer.init(params)` differs from `opt_state` in structure or a
      leaf's shape (params not the ones the state belongs to).
  """
  fresh = optimizer.init(params)
  if jax.tree.structure(fresh) != jax.tree.structure(opt_state):
    raise ValueError("reset_optimizer_state: opt_state is not optimizer's state for params "
                     f"(structures {jax.tree.structure(opt_state)} and "
                     f"{jax.tree.structure(fresh)}).")
  for (path, old), new in zip(jax.tree_util.tree_flatten_with_path(opt_state)[0],
                              jax.tree.leaves(fresh)):
    if jnp.shape(old) != jnp.shape(new):  # jnp.where below would broadcast them
      raise ValueError(f"reset_optimizer_state: opt_state{jax.tree_util.keystr(path)} has "
                       f"shape {jnp.shape(old)}, but optimizer.init(params) gives "
                       f"{jnp.shape(new)}.")
  if where is None:
    where = jax.tree.map(lambda _: True, params)
  # optax.masked / multi_transform keep MaskedNode (an empty subtree) for the leaves
  # they do not own: take it as a leaf and keep it, so the trees still line up.
  masked = lambda x: isinstance(x, optax.MaskedNode)
  chosen = optax.tree_utils.tree_map_params(
      optimizer, lambda v, w: v if masked(v) else w, opt_state, where,
      transform_non_params=lambda _: False, is_leaf=masked)
  return jax.tree.map(lambda c, old, new: jnp.where(c, new, old), chosen, opt_state, fresh)
