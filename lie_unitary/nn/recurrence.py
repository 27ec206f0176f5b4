"""Recurrence kernels with hand-written reverse passes, and the modReLU activations.

Pure functions of arrays (no flax). The loops compute h_t = f(h_{t-1} @ W + p_t),
t = 1..L, time-major, row-vector convention. Their reverse passes run one backward loop
for the per-step deltas δ_t and form W̄ = Σ_t h_{t-1}ᵀ δ_t as ONE matmul after it (autodiff
of `lax.scan` accumulates it step by step). All are `jax.custom_vjp`: reverse mode only.

Letters in names: B batch, L steps, H state size (2n for complex pairs), n complex units.
"""

from __future__ import annotations

import functools
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lie_unitary import algebra

__all__ = ["COMPLEX_PRODUCTS", "ELEMENTWISE_ACTIVATIONS", "Projection", "choose_complex_product",
           "elementwise_activation", "elementwise_recurrence", "modrelu", "modrelu_pairs",
           "modrelu_recurrence", "project", "real_modrelu", "real_modrelu_recurrence"]

_ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "identity": lambda x: x}
ELEMENTWISE_ACTIVATIONS = tuple(_ACTIVATIONS)
# f'(a) from the output h = f(a) (relu's at 0 taken as 0): no pre-activations needed.
_DERIVATIVES_FROM_OUTPUT = {
    "relu": lambda h: (h > 0).astype(h.dtype),
    "tanh": lambda h: 1 - h * h,
    "identity": jnp.ones_like,
}
# Added under the square root of |z|² in modReLU: finite gradients at z = 0.
_MODRELU_EPS = 1e-5
# How `modrelu_recurrence` multiplies by W = [[P, Q], [-Q, P]]: one real (2n, 2n) product,
# or Gauss's three (n, n) ones.
COMPLEX_PRODUCTS = ("real", "gauss")
# CPU: Gauss's product from this many complex units on. The image task's training step,
# 2-core Xeon: 1.10× the time at n = 116, 1.04× at 180, 0.928× at 250 (docs: design decisions).
_CPU_GAUSS_MIN_N = 250


def elementwise_activation(name: str) -> Callable[[jax.Array], jax.Array]:
  """The activation 'relu', 'tanh' or 'identity' (real array -> same shape and dtype).

  Raises:
    ValueError: on an unknown name.
  """
  if name not in _ACTIVATIONS:
    raise ValueError(f"unknown activation {name!r}; choose from {sorted(_ACTIVATIONS)}.")
  return _ACTIVATIONS[name]


class Projection(NamedTuple):
  """The inputs' contributions p_t = x_t @ kernel (+ bias), formed a step at a time inside
  a kernel's loop instead of stored as an (L, B, H) array before it.

  Attributes:
    x: real (L, B, D), the inputs (time-major).
    kernel: real (D, H).
    bias: real (H,), or None.
  """
  x: jax.Array
  kernel: jax.Array
  bias: jax.Array | None = None


def project(x, kernel, bias=None) -> jax.Array:
  """x @ kernel (+ bias) over any leading axes: real (..., D), (D, H), (H,) -> (..., H).
  One input feature (D = 1) is scaled, x · kernel[0]: the same numbers, and a reverse
  pass that is a fused sum rather than a matmul."""
  y = x * kernel[0] if x.shape[-1] == 1 else x @ kernel
  return y if bias is None else y + bias


def _per_step(projected):
  """(what a loop reads a step at a time, the step's p_t from it) for an (L, B, H) array
  or a `Projection`."""
  if isinstance(projected, Projection):
    return projected.x, lambda x_t: project(x_t, projected.kernel, projected.bias)
  return projected, lambda p_t: p_t


def _projected_cotangent(projected, deltas):
  """The cotangent of `projected` from the deltas (L, B, H): the deltas themselves, or a
  `Projection`'s (x̄, kernel̄, bias̄)."""
  if not isinstance(projected, Projection):
    return deltas
  return jax.vjp(lambda q: project(*q), projected)[1](deltas)[0]


def _lazy(projected):
  """What a reverse pass keeps of `projected`: a `Projection` (small), not an array."""
  return projected if isinstance(projected, Projection) else None


def _check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH) -> None:
  """Raises ValueError unless W, h_0, p are (H, H), (B, H), (L, B, H) (a `Projection`: x
  (L, B, D), kernel (D, H), bias (H,) or None), L ≥ 1 (trace time)."""
  H = transition_HxH.shape[-1]
  if isinstance(projected_LxBxH, Projection):
    x, kernel, bias = projected_LxBxH
    if (x.ndim != 3 or kernel.shape != (x.shape[-1], H)
        or (bias is not None and bias.shape != (H,))):
      raise ValueError(f"expected a Projection of x (L, B, D), kernel (D, H), bias (H,) for "
                       f"H = {H}; got {x.shape=}, {kernel.shape=}, "
                       f"bias {None if bias is None else bias.shape}.")
    shape = x.shape[:2] + (H,)
  else:
    shape = projected_LxBxH.shape
  if (transition_HxH.shape != (H, H) or h0_BxH.ndim != 2 or h0_BxH.shape[-1] != H
      or len(shape) != 3 or shape[1:] != h0_BxH.shape):
    raise ValueError(f"expected (H, H), (B, H), (L, B, H); got {transition_HxH.shape=}, "
                     f"{h0_BxH.shape=}, projected {shape}.")
  if shape[0] == 0:
    raise ValueError("the sequence has no steps (L = 0): give at least one.")
  parts = ((("transition", transition_HxH), ("h0", h0_BxH))
           + (tuple(zip(("x", "kernel", "bias"), projected_LxBxH))
              if isinstance(projected_LxBxH, Projection) else (("projected", projected_LxBxH),)))
  for name, a in parts:
    _check_real_float(a, name)
  _check_loop_dtype(parts)


def _check_loop_dtype(parts) -> None:
  """Raises ValueError unless the arrays of `parts` (names and arrays, h_0 among them;
  None passes) are of h_0's dtype, the loop's, or narrower for the data (x, projected):
  a wider input would change the carry's dtype, a narrower parameter get a wider gradient."""
  dtypes = {name: jnp.result_type(a) for name, a in parts if a is not None}
  dtype = dtypes["h0"]
  if any(d != dtype and not (name in ("x", "projected") and jnp.promote_types(d, dtype) == dtype)
         for name, d in dtypes.items()):
    raise ValueError("the recurrence computes in h0's dtype: W, h0, the kernel and the bias "
                     "must share it, and the data may be narrower, not wider (cast, e.g. x to "
                     "the cell's param_dtype); got "
                     + ", ".join(f"{name} {d}" for name, d in dtypes.items()) + ".")


def _check_real_float(a, name: str) -> None:
  """Raises ValueError unless `a` (None passes) is a float32 or float64 array: the
  recurrences are real, and their loops keep the inputs' dtype."""
  if a is not None and not jnp.issubdtype(jnp.result_type(a), jnp.floating):
    raise ValueError(f"{name} must be real float32 or float64; got dtype {jnp.result_type(a)}.")
  if a is not None:
    algebra.check_real_dtype(jnp.result_type(a), f"{name}'s dtype")


def _transition_cotangent(h0_BxH, hs_LxBxH, deltas_LxBxH):
  """W̄ = Σ_t h_{t-1}ᵀ δ_t: h_0ᵀ δ_1 plus ONE 2-D matmul (faster on XLA:CPU than an
  einsum over L and B; docs/rnn.md)."""
  H = h0_BxH.shape[-1]
  return (h0_BxH.T @ deltas_LxBxH[0]
          + hs_LxBxH[:-1].reshape(-1, H).T @ deltas_LxBxH[1:].reshape(-1, H))


def _pairs(a):
  """[a, a] on the last axis: one value per complex unit, for its Re and Im halves."""
  return jnp.concatenate([a, a], axis=-1)


def _loop(step, carry, xs, reverse=False, unroll=1):
  """`lax.scan(step, carry, xs, reverse=reverse, unroll=unroll)` as a `fori_loop` writing
  into preallocated (L, ...) buffers: 11-15% faster on XLA:CPU for the modReLU kernels.
  `elementwise_recurrence` keeps `scan` (the two round differently under vmap, and its
  golden runs pin its numbers).
  """
  length = jax.tree.leaves(xs)[0].shape[0]
  ys = jax.eval_shape(lambda c, x: step(c, x)[1], carry, jax.tree.map(lambda a: a[0], xs))
  buffers = jax.tree.map(lambda y: jnp.zeros((length,) + y.shape, y.dtype), ys)

  def body(i, state):
    carry, buffers = state
    t = length - 1 - i if reverse else i
    carry, y = step(carry, jax.tree.map(
        lambda a: jax.lax.dynamic_index_in_dim(a, t, 0, keepdims=False), xs))
    buffers = jax.tree.map(lambda b, v: jax.lax.dynamic_update_index_in_dim(b, v, t, 0),
                           buffers, y)
    return carry, buffers

  return jax.lax.fori_loop(0, length, body, (carry, buffers), unroll=unroll)


def _final(step, carry, xs, unroll=1):
  """The final carry of `_loop(step, carry, xs)`, with no (L, ...) buffers."""
  length = jax.tree.leaves(xs)[0].shape[0]

  def body(t, carry):
    return step(carry, jax.tree.map(
        lambda a: jax.lax.dynamic_index_in_dim(a, t, 0, keepdims=False), xs))[0]

  return jax.lax.fori_loop(0, length, body, carry, unroll=unroll)


def _reverse(body, carry, ct, xs, last_only, unroll, loop=_loop):
  """Runs `body(carry, ct_h_t, x_t) -> (carry, y_t)` from t = L - 1 down to 0 with `loop`
  (`_loop` or `lax.scan`) -> (final carry, ys).

  ct is every output's cotangent (L, B, H), or with `last_only` the last one's (B, H): it
  enters at t = L - 1, carried, and zeros after, not read from an (L, B, H) array of
  zeros (the same sums: adding a zero is exact).
  """
  if not last_only:
    return loop(lambda c, x: body(c, *x), carry, (ct, xs), reverse=True, unroll=unroll)

  def step(c, x):
    c, pending = c
    c, y = body(c, pending, x)
    return (c, jnp.zeros_like(pending)), y

  (carry, _), ys = loop(step, (carry, ct), xs, reverse=True, unroll=unroll)
  return carry, ys


def _states_loop(step, h0, projected, unroll):
  """Runs `step(h_{t-1}, p_t) -> (h_t, extra_t)` for t = 0..L-1 -> (h_L, inputs, extras):
  inputs (L, B, H) the state each step starts from (inputs[t] = h_{t-1}, inputs[0] = h0),
  extras (L, ...).

  Laid out so that the reverse pass forms W̄ = Σ_t h_{t-1}ᵀ δ_t as ONE matmul of whole
  buffers (`_deltas_loop`): slices of them would be copied first on XLA:CPU.
  """
  xs, p_of = _per_step(projected)
  length = xs.shape[0]
  extra = jax.eval_shape(lambda h, x: step(h, p_of(x))[1], h0, xs[0])
  inputs = jnp.zeros((length,) + h0.shape, h0.dtype)
  extras = jax.tree.map(lambda e: jnp.zeros((length,) + e.shape, e.dtype), extra)

  def body(t, state):
    h, inputs, extras = state
    inputs = jax.lax.dynamic_update_index_in_dim(inputs, h, t, 0)
    h, e = step(h, p_of(jax.lax.dynamic_index_in_dim(xs, t, 0, keepdims=False)))
    extras = jax.tree.map(lambda b, v: jax.lax.dynamic_update_index_in_dim(b, v, t, 0),
                          extras, e)
    return h, inputs, extras

  return jax.lax.fori_loop(0, length, body, (h0, inputs, extras), unroll=unroll)


def _outputs(last, inputs):
  """h_1..h_L (L, B, H) from `_states_loop`'s last state and inputs."""
  return jnp.concatenate([inputs[1:], last[None]])


def _deltas_loop(body, carry, ct, last, inputs, extras, last_only, unroll):
  """The reverse pass over `_states_loop`'s buffers: `body(carry, ct_h_t, h_t, extra_t)
  -> (carry, δ_t)` from t = L - 1 down to 0 -> (carry, deltas (L, B, H)), so that
  W̄ = inputsᵀ deltas, one matmul of whole buffers.

  ct: every output's cotangent (L, B, H), or with `last_only` the last one's (B, H),
  carried in at t = L - 1 and zeros after (as `_reverse`).
  """
  length = inputs.shape[0]
  at = lambda a, t: jax.lax.dynamic_index_in_dim(a, t, 0, keepdims=False)

  def step(i, state):
    carry, pending, deltas = state
    t = length - 1 - i
    ct_h = pending if last_only else at(ct, t)
    h = jnp.where(t == length - 1, last, at(inputs, jnp.minimum(t + 1, length - 1)))
    carry, delta = body(carry, ct_h, h, jax.tree.map(lambda a: at(a, t), extras))
    deltas = jax.lax.dynamic_update_index_in_dim(deltas, delta, t, 0)
    return carry, jnp.zeros_like(pending), deltas

  pending = ct if last_only else jnp.zeros_like(last)
  carry, _, deltas = jax.lax.fori_loop(0, length, step, (carry, pending, jnp.zeros_like(inputs)),
                                       unroll=unroll)
  return carry, deltas


def _whole_cotangent(inputs, deltas):
  """W̄ = Σ_t h_{t-1}ᵀ δ_t as one (H, L·B) @ (L·B, H) matmul of whole buffers."""
  H = inputs.shape[-1]
  return inputs.reshape(-1, H).T @ deltas.reshape(-1, H)


def _recurrence_forward(transition, h0, projected, activation, unroll, last_only=False):
  f = elementwise_activation(activation)
  xs, p_of = _per_step(projected)

  def body(h, x):
    h = f(h @ transition + p_of(x))
    return h, None if last_only else h

  last, hs = jax.lax.scan(body, h0, xs, unroll=unroll)
  return last if last_only else hs


_recurrence = jax.custom_vjp(_recurrence_forward, nondiff_argnums=(3, 4, 5))


def _recurrence_fwd(transition, h0, projected, activation, unroll, last_only):
  hs = _recurrence_forward(transition, h0, projected, activation, unroll)
  return hs[-1] if last_only else hs, (transition, h0, hs, _lazy(projected))


def _recurrence_bwd(activation, unroll, last_only, res, ct):
  transition, h0, hs, projected = res
  transition_t = transition.T

  def body(delta_next, ct_h, h):
    # f'(a_t) from h_t inside the loop: no separate pass over an (L, B, H) array.
    delta = (ct_h + delta_next @ transition_t) * _DERIVATIVES_FROM_OUTPUT[activation](h)
    return delta, delta

  delta_first, deltas = _reverse(body, jnp.zeros_like(h0), ct, hs, last_only, unroll,
                                 loop=jax.lax.scan)
  return (_transition_cotangent(h0, hs, deltas), delta_first @ transition_t,
          _projected_cotangent(projected, deltas))


_recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)


def elementwise_recurrence(transition_HxH, h0_BxH, projected_LxBxH, activation: str = "relu",
                           unroll: int = 1, last_only: bool = False) -> jax.Array:
  """All states of h_t = f(h_{t-1} @ W + p_t), t = 1..L, with a hand-written reverse pass.

  Args:
    transition_HxH: real (H, H) W (row-vector convention: h @ W), float32 or float64.
    h0_BxH: real (B, H) initial state; its dtype is the loop's (the data's or wider).
    projected_LxBxH: real (L, B, H), the inputs' contributions p_t (time-major), or a
      `Projection` of the inputs, formed a step at a time inside the loop.
    activation: 'relu', 'tanh' or 'identity'.
    unroll: steps per loop iteration (forward and reverse loops).
    last_only: return h_L alone: evaluated, the loop keeps no states; differentiated,
      the reverse pass reads no (L, B, H) cotangent of zeros.

  Returns:
    Real (L, B, H), h0's dtype: h_1..h_L; (B, H) h_L with `last_only`.

  Raises:
    ValueError: on mismatched shapes, no steps (L = 0), an unknown activation, an
      input that is not real float32 / float64, or a dtype other
      than h0's (data may be narrower).
  """
  elementwise_activation(activation)
  _check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  return _recurrence(transition_HxH, h0_BxH, projected_LxBxH, activation, unroll,
                     bool(last_only))


def _check_bias(z, bias) -> None:
  """A modReLU bias: real (n,) for z (..., n) (not broadcast from another shape)."""
  if jnp.iscomplexobj(bias) or jnp.shape(bias) != jnp.shape(z)[-1:]:
    raise ValueError(f"the modReLU bias must be real {jnp.shape(z)[-1:]} for z of shape "
                     f"{jnp.shape(z)}; got shape {jnp.shape(bias)}, dtype {jnp.result_type(bias)}.")


def modrelu(z, bias, eps: float = _MODRELU_EPS) -> jax.Array:
  """modReLU(z) = relu(|z| + b) z / |z| (Arjovsky et al. 2016), |z| = sqrt(|z|² + eps).

  At z = 0 exactly the output is 0 with derivative 0 (as expRNN's real modReLU).

  Args:
    z: complex (..., n), complex64 or complex128.
    bias: real (n,) b (broadcast against z's last axis).
    eps: added under the square root of |z|², so that the gradient is finite at 0.

  Returns:
    Complex (..., n), z's dtype.

  Raises:
    ValueError: for a real z, or a bias that is complex or not (n,).
  """
  if not jnp.iscomplexobj(z):
    raise ValueError(f"modrelu takes complex z (real_modrelu: real); got dtype "
                     f"{jnp.result_type(z)}.")
  _check_bias(z, bias)
  norm = jnp.sqrt(jnp.real(z) ** 2 + jnp.imag(z) ** 2 + eps)
  scale = jnp.where(z != 0, jax.nn.relu(norm + bias) / norm, 0)
  return z * scale.astype(z.dtype)


def modrelu_pairs(pre_Bx2n, bias_n, eps: float = _MODRELU_EPS) -> jax.Array:
  """`modrelu` on complex vectors held as real pairs [Re z, Im z].

  Args:
    pre_Bx2n: real (..., 2n): the first n entries are Re z, the last n Im z.
    bias_n: real (n,) b.
    eps: added under the square root of |z|², so that the gradient is finite at 0.

  Returns:
    Real (..., 2n), [Re, Im] of modReLU(z), the promoted dtype of pre_Bx2n and bias_n.

  Raises:
    ValueError: if `bias_n` is complex or not (n,) for pre_Bx2n (..., 2n).
  """
  if (jnp.iscomplexobj(bias_n) or jnp.ndim(bias_n) != 1
      or 2 * jnp.shape(bias_n)[0] != jnp.shape(pre_Bx2n)[-1]):
    raise ValueError(f"the modReLU bias must be real (n,) for pairs (..., 2n); got pairs "
                     f"{jnp.shape(pre_Bx2n)}, bias {jnp.shape(bias_n)} {jnp.result_type(bias_n)}.")
  n = bias_n.shape[-1]
  x, y = pre_Bx2n[..., :n], pre_Bx2n[..., n:]
  norm = jnp.sqrt(x ** 2 + y ** 2 + eps)
  scale = jnp.where((x != 0) | (y != 0), jax.nn.relu(norm + bias_n) / norm, 0)
  return pre_Bx2n * _pairs(scale)


def choose_complex_product(n: int, backend: str | None = None) -> str:
  """The product `modrelu_recurrence` runs fastest with for n complex units: "gauss" on
  CPU from n ≥ 250 on, else "real" (a static rule; GPU/TPU were not measured: "real").

  Args:
    n: complex units, an integer ≥ 1.
    backend: "cpu", "gpu", "tpu", ...; default `jax.default_backend()`.

  Returns:
    "real" or "gauss" (`COMPLEX_PRODUCTS`).

  Raises:
    ValueError: if n is not a positive integer.
  """
  n = algebra.check_positive_int(n)
  backend = jax.default_backend() if backend is None else backend
  return "gauss" if backend == "cpu" and n >= _CPU_GAUSS_MIN_N else "real"


class _Blocks(NamedTuple):
  """W = [[P, Q], [-Q, P]] (n, n) blocks for Gauss's product, and P + Q."""
  p: jax.Array
  q: jax.Array
  sum: jax.Array


def _blocks(transition):
  n = transition.shape[-1] // 2
  p, q = transition[:n, :n], transition[:n, n:]
  return _Blocks(p, q, p + q)


def _times(h, w):
  """h @ W for `w` the (2n, 2n) W or its `_Blocks`: [x, y] @ W = [xP - yQ, xQ + yP], the
  second as (x + y)(P + Q) - xP - yQ."""
  if not isinstance(w, _Blocks):
    return h @ w
  n = w.p.shape[0]
  x, y = h[..., :n], h[..., n:]
  xp, yq = x @ w.p, y @ w.q
  return jnp.concatenate([xp - yq, (x + y) @ w.sum - xp - yq], axis=-1)


def _times_transpose(d, w):
  """d @ Wᵀ: [a, b] @ Wᵀ = [aPᵀ + bQᵀ, bPᵀ - aQᵀ], the second as (b - a)(P + Q)ᵀ + aPᵀ - bQᵀ."""
  if not isinstance(w, _Blocks):
    return d @ w.T
  n = w.p.shape[0]
  a, b = d[..., :n], d[..., n:]
  ap, bq = a @ w.p.T, b @ w.q.T
  return jnp.concatenate([ap + bq, (b - a) @ w.sum.T + ap - bq], axis=-1)


def _modrelu_step(h, p, transition, bias):
  """One modReLU step -> (h_t, r_t): the state and each unit's r = sqrt(|z|² + eps);
  `transition` W or its `_Blocks`."""
  n = bias.shape[-1]
  pre = _times(h, transition) + p
  r = jnp.sqrt(pre[..., :n] ** 2 + pre[..., n:] ** 2 + _MODRELU_EPS)
  scale = jax.nn.relu(r + bias) / r
  return pre * _pairs(scale), r


def _modrelu_recurrence_forward(transition, h0, projected, bias, unroll):
  xs, p_of = _per_step(projected)
  return _loop(lambda h, x: (_modrelu_step(h, p_of(x), transition, bias)[0],) * 2, h0, xs,
               unroll=unroll)[1]


def _factors(transition, product):
  return _blocks(transition) if product == "gauss" else transition


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6))
def _modrelu_recurrence(transition, h0, projected, bias, unroll, last_only, product):
  w = _factors(transition, product)
  if last_only:
    xs, p_of = _per_step(projected)
    return _final(lambda h, x: _modrelu_step(h, p_of(x), w, bias), h0, xs, unroll)
  return _modrelu_recurrence_forward(w, h0, projected, bias, unroll)


def _modrelu_recurrence_fwd(transition, h0, projected, bias, unroll, last_only, product):
  # Saves each unit's r (half a state a step) rather than recomputing the
  # pre-activations with a second (L·B, H) @ (H, H) matmul.
  w = _factors(transition, product)
  last, inputs, rs = _states_loop(lambda h, p: _modrelu_step(h, p, w, bias), h0,
                                  projected, unroll)
  return (last if last_only else _outputs(last, inputs),
          (transition, last, inputs, rs, bias, _lazy(projected)))


def _modrelu_pre_activations(hs, rs, bias):
  """modReLU's Jacobian factors from outputs hs (..., 2n), moduli rs (..., n), bias (n,).

  Per unit z = (x, y), r = sqrt(x² + y² + eps), s = relu(r + b) / r, out = s z:
  Jᵀ v = s v + coef · z (z·v), coef = (1 - s) / r², and ∂out/∂b · v = (z·v) / r, where
  the unit is active (r + b > 0 and out ≠ 0); elsewhere s = coef = 0 and z is 0. At
  z = 0 exactly the derivative is taken as 0, as `real_modrelu` and PyTorch's (the
  smoothed one, ≈ 4 for b = 0.01, would blow the cotangent up over a blank image row).

  Returns:
    ``(z, s, coef, active)``: z (..., 2n) as pairs; s, coef (..., n); active bool (..., n).
  """
  n = bias.shape[-1]
  nonzero = (hs[..., :n] != 0) | (hs[..., n:] != 0)
  active = (rs + bias > 0) & nonzero
  s = jnp.where(active, jax.nn.relu(rs + bias) / rs, 0)
  pre = hs / _pairs(jnp.where(active, s, 1))
  coef = jnp.where(active, (1 - s) / (rs * rs), 0)
  return pre, s, coef, active


def _modrelu_recurrence_bwd(unroll, last_only, product, res, ct):
  transition, last, inputs, rs, bias, projected = res
  n = bias.shape[-1]
  w = _factors(transition, product)

  def body(carry, ct_h, h, r):
    delta_next, ct_bias = carry
    # The Jacobian's factors inside the loop, where h and r are in cache.
    z, s, coef, active = _modrelu_pre_activations(h, r, bias)
    v = ct_h + _times_transpose(delta_next, w)
    zv = z[..., :n] * v[..., :n] + z[..., n:] * v[..., n:]
    delta = _pairs(s) * v + _pairs(coef * zv) * z
    ct_bias = ct_bias + jnp.sum(jnp.where(active, zv / r, 0), axis=0)
    return (delta, ct_bias), delta

  (_, ct_bias), deltas = _deltas_loop(body, (jnp.zeros_like(last), jnp.zeros_like(bias)), ct,
                                      last, inputs, rs, last_only, unroll)
  return (_whole_cotangent(inputs, deltas), _times_transpose(deltas[0], w),
          _projected_cotangent(projected, deltas), ct_bias)


_modrelu_recurrence.defvjp(_modrelu_recurrence_fwd, _modrelu_recurrence_bwd)


def modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_n,
                       unroll: int = 1, last_only: bool = False,
                       product: str = "real") -> jax.Array:
  """All states of h_t = modReLU(h_{t-1} @ W + p_t), t = 1..L, with a hand-written reverse pass.

  States are n complex units as real pairs [Re h, Im h] (H = 2n); modReLU acts per unit
  (`modrelu_pairs`, eps = 1e-5).

  Args:
    transition_HxH: real (H, H) W, H = 2n (h @ W), float32 or float64; for a unitary U
      acting as h ↦ U h, the block matrix [[Re Uᵀ, Im Uᵀ], [-Im Uᵀ, Re Uᵀ]].
    h0_BxH: real (B, H) initial state [Re h_0, Im h_0]; its dtype is the
      loop's (the data's or wider).
    projected_LxBxH: real (L, B, H), the inputs' contributions p_t (time-major), or a
      `Projection` of the inputs, formed a step at a time inside the loop.
    bias_n: real (n,), the modReLU bias of each complex unit.
    unroll: steps per loop iteration (forward and reverse loops).
    last_only: return h_L alone (as `elementwise_recurrence`).
    product: "real" (h @ W, one real (H, H) product a step) or "gauss" (three (n, n)
      products from W's blocks [[P, Q], [-Q, P]], 25% fewer FLOPs; the block structure
      is assumed, not checked: only for W from a complex matrix). The two round
      differently; `choose_complex_product` picks the faster.

  Returns:
    Real (L, B, H), h0's dtype: h_1..h_L as [Re, Im] pairs; (B, H) h_L with
    `last_only`.

  Raises:
    ValueError: on mismatched shapes (a bias not (H / 2,) included), L = 0, an input
      that is not real float32 / float64, a dtype other than h0's (data may
      be narrower), or an unknown
      `product`.
  """
  if product not in COMPLEX_PRODUCTS:
    raise ValueError(f"product must be one of {COMPLEX_PRODUCTS}; got {product!r}.")
  _check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  _check_real_float(bias_n, "bias_n")
  if bias_n.ndim != 1 or 2 * bias_n.shape[0] != transition_HxH.shape[-1]:
    raise ValueError(f"expected a bias (H / 2,) for states (B, H); got {bias_n.shape=}, "
                     f"{h0_BxH.shape=}.")
  _check_loop_dtype((("h0", h0_BxH), ("bias_n", bias_n)))
  return _modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_n, unroll,
                             bool(last_only), product)


def real_modrelu(z, bias) -> jax.Array:
  """modReLU on real numbers, as expRNN: sign(z) · relu(|z| + b).

  Args:
    z: real (..., n), float32 or float64.
    bias: real (n,) b, broadcast against z's last axis.

  Returns:
    Real (..., n), the promoted dtype of z and b.

  Raises:
    ValueError: for a complex z, or a bias that is complex or not (n,).
  """
  if jnp.iscomplexobj(z):
    raise ValueError(f"real_modrelu takes real z (modrelu: complex); got dtype "
                     f"{jnp.result_type(z)}.")
  _check_bias(z, bias)
  return jnp.sign(z) * jax.nn.relu(jnp.abs(z) + bias)


def _real_modrelu_forward(transition, h0, projected, bias, unroll, last_only=False):
  xs, p_of = _per_step(projected)

  def body(h, x):
    h = real_modrelu(h @ transition + p_of(x), bias)
    return h, h

  if last_only:
    return _final(body, h0, xs, unroll)
  return _loop(body, h0, xs, unroll=unroll)[1]


_real_modrelu_recurrence = jax.custom_vjp(_real_modrelu_forward, nondiff_argnums=(4, 5))


def _real_modrelu_recurrence_fwd(transition, h0, projected, bias, unroll, last_only):
  step = lambda h, p: (real_modrelu(h @ transition + p, bias), None)
  last, inputs, _ = _states_loop(step, h0, projected, unroll)
  return (last if last_only else _outputs(last, inputs),
          (transition, last, inputs, _lazy(projected)))


def _real_modrelu_recurrence_bwd(unroll, last_only, res, ct):
  transition, last, inputs, projected = res
  transition_t = transition.T

  def body(delta_next, ct_h, h, _):
    # d h / d z = 1 exactly where h ≠ 0 (what autodiff of `real_modrelu` gives).
    delta = jnp.where(h != 0, ct_h + delta_next @ transition_t, 0)
    return delta, delta

  delta_first, deltas = _deltas_loop(body, jnp.zeros_like(last), ct, last, inputs, None,
                                     last_only, unroll)
  # d h / d b = sign(z) where h ≠ 0, i.e. sign(h); δ is already zero elsewhere. Fused
  # reductions read the buffers in place (an einsum would copy the slices).
  ct_bias = (jnp.sum(jnp.sign(inputs[1:]) * deltas[:-1], axis=(0, 1))
             + jnp.sum(jnp.sign(last) * deltas[-1], axis=0))
  return (_whole_cotangent(inputs, deltas), delta_first @ transition_t,
          _projected_cotangent(projected, deltas), ct_bias)


_real_modrelu_recurrence.defvjp(_real_modrelu_recurrence_fwd, _real_modrelu_recurrence_bwd)


def real_modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_H,
                            unroll: int = 1, last_only: bool = False) -> jax.Array:
  """All states of h_t = real_modrelu(h_{t-1} @ W + p_t, b), t = 1..L, hand-written reverse.

  The recurrence of expRNN's orthogonal RNN; the reverse pass needs only the saved states.

  Args:
    transition_HxH: real (H, H) W (row-vector convention: h @ W), float32 or float64.
    h0_BxH: real (B, H) initial state; its dtype is the loop's (the data's or wider).
    projected_LxBxH: real (L, B, H), the inputs' contributions p_t (time-major), or a
      `Projection` of the inputs, formed a step at a time inside the loop.
    bias_H: real (H,), the modReLU bias b.
    unroll: steps per loop iteration (forward and reverse loops).
    last_only: return h_L alone (as `elementwise_recurrence`).

  Returns:
    Real (L, B, H), h0's dtype: h_1..h_L; (B, H) h_L with `last_only`.

  Raises:
    ValueError: on mismatched shapes (a bias not (H,) included), L = 0, an input
      that is not real float32 / float64, or a dtype other than
      h0's (data may be narrower).
  """
  _check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  _check_real_float(bias_H, "bias_H")
  if bias_H.shape != h0_BxH.shape[-1:]:
    raise ValueError(f"expected a bias (H,) for states (B, H); got {bias_H.shape=}, "
                     f"{h0_BxH.shape=}.")
  _check_loop_dtype((("h0", h0_BxH), ("bias_H", bias_H)))
  return _real_modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_H, unroll,
                                  bool(last_only))
