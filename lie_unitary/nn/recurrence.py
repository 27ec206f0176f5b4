"""Recurrence kernels with hand-written reverse passes, and the activations they use.

Pure functions of arrays (no flax): the all-steps loops that `SequenceModel` runs for
the recurrent cells of paper §4 (the guRNN, the unconstrained `free` cell, the IRNN and
the tanh RNN) and `OrthogonalRNNCell` (expRNN's architecture), and modReLU (Arjovsky
et al. 2016) on complex numbers, on complex vectors held as real pairs [Re z, Im z]
and on real numbers.

The loops compute h_t = f(h_{t-1} @ W + p_t), t = 1..L, time-major, in the row-vector
convention (h @ W). Their reverse passes run one backward loop for the per-step deltas
and form W̄ = Σ_t h_{t-1}ᵀ δ_t as ONE matmul after the loop, where autodiff of
`lax.scan` accumulates it step by step. Both are `jax.custom_vjp`: reverse mode only.

Letters in names: B batch, L steps, H state size (2n for complex pairs), n complex units.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp

__all__ = [
    "ELEMENTWISE_ACTIVATIONS",
    "elementwise_activation",
    "elementwise_recurrence",
    "modrelu",
    "modrelu_pairs",
    "modrelu_recurrence",
    "real_modrelu",
    "real_modrelu_recurrence",
]

_ACTIVATIONS = {"relu": jax.nn.relu, "tanh": jnp.tanh, "identity": lambda x: x}
# The elementwise activations of `elementwise_recurrence`, by name.
ELEMENTWISE_ACTIVATIONS = tuple(_ACTIVATIONS)
# f'(a) written in the output h = f(a) (relu's derivative at a = 0 taken as 0): the
# reverse loops need no pre-activations.
_DERIVATIVES_FROM_OUTPUT = {
    "relu": lambda h: (h > 0).astype(h.dtype),
    "tanh": lambda h: 1 - h * h,
    "identity": jnp.ones_like,
}
# Added under the square root of |z|² in modReLU: finite gradients at z = 0.
_MODRELU_EPS = 1e-5


def elementwise_activation(name: str) -> Callable[[jax.Array], jax.Array]:
  """The elementwise activation called `name`.

  Args:
    name: 'relu', 'tanh' or 'identity'.

  Returns:
    A function mapping a real array to a real array of the same shape and dtype.

  Raises:
    ValueError: on an unknown name.
  """
  if name not in _ACTIVATIONS:
    raise ValueError(f"unknown activation {name!r}; choose from {sorted(_ACTIVATIONS)}.")
  return _ACTIVATIONS[name]


def _check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH) -> None:
  """Raises ValueError unless W, h_0 and p are (H, H), (B, H), (L, B, H) with L ≥ 1.

  Reads shapes only, so the check runs at trace time under `jax.jit`.
  """
  H = transition_HxH.shape[-1]
  if (transition_HxH.shape != (H, H) or h0_BxH.ndim != 2 or h0_BxH.shape[-1] != H
      or projected_LxBxH.ndim != 3 or projected_LxBxH.shape[1:] != h0_BxH.shape):
    raise ValueError(f"expected (H, H), (B, H), (L, B, H); got {transition_HxH.shape=}, "
                     f"{h0_BxH.shape=}, {projected_LxBxH.shape=}.")
  if projected_LxBxH.shape[0] == 0:
    raise ValueError("the sequence has no steps (L = 0): give at least one.")


def _transition_cotangent(h0_BxH, hs_LxBxH, deltas_LxBxH):
  """W̄ = Σ_t h_{t-1}ᵀ δ_t, t = 1..L: real (H, H).

  Formed as h_0ᵀ δ_1 plus ONE (H, (L-1)·B) @ ((L-1)·B, H) matmul: XLA's CPU dot runs
  this 2-D product faster than an einsum contracting the two axes L and B
  (docs/rnn.md has the timing).
  """
  H = h0_BxH.shape[-1]
  return (h0_BxH.T @ deltas_LxBxH[0]
          + hs_LxBxH[:-1].reshape(-1, H).T @ deltas_LxBxH[1:].reshape(-1, H))


def _pairs(a):
  """[a, a] on the last axis: one value per complex unit, for its Re and Im halves."""
  return jnp.concatenate([a, a], axis=-1)


def _loop(step, carry, xs, reverse=False, unroll=1):
  """`jax.lax.scan(step, carry, xs, reverse=reverse, unroll=unroll)` (bit for bit on
  random inputs; to rounding under vmap, below) as a `fori_loop` that writes each
  step's outputs into preallocated (L, ...) buffers.

  On XLA:CPU this loop ran 11-15% faster than `scan` (the modReLU kernel's forward and
  reverse passes at L = 784, B = 64, n = 116, one core): `scan`'s stacked outputs cost
  ~17 µs a step more there than a write into a carried buffer. The modReLU kernels (the
  image tasks' and the long copy task's cells) use it. `elementwise_recurrence` keeps
  `scan`: not timed at its sizes, and in a vmapped training run the two loops round
  differently (a golden run's validation loss moved by 3e-4 after 40 updates).
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


def _recurrence_forward(transition, h0, projected, activation, unroll):
  f = elementwise_activation(activation)

  def body(h, p):
    h = f(h @ transition + p)
    return h, h

  return jax.lax.scan(body, h0, projected, unroll=unroll)[1]


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _recurrence(transition, h0, projected, activation, unroll):
  return _recurrence_forward(transition, h0, projected, activation, unroll)


def _recurrence_fwd(transition, h0, projected, activation, unroll):
  hs = _recurrence_forward(transition, h0, projected, activation, unroll)
  return hs, (transition, h0, hs)


def _recurrence_bwd(activation, unroll, res, ct_hs):
  transition, h0, hs = res
  transition_t = transition.T

  def body(delta_next, inputs):
    ct_h, h = inputs
    # f'(a_t) from h_t inside the loop: no separate pass over an (L, B, H) array.
    delta = (ct_h + delta_next @ transition_t) * _DERIVATIVES_FROM_OUTPUT[activation](h)
    return delta, delta

  delta_first, deltas = jax.lax.scan(body, jnp.zeros_like(h0), (ct_hs, hs),
                                     reverse=True, unroll=unroll)
  return _transition_cotangent(h0, hs, deltas), delta_first @ transition_t, deltas


_recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)


def elementwise_recurrence(transition_HxH, h0_BxH, projected_LxBxH, activation: str = "relu",
                           unroll: int = 1) -> jax.Array:
  """All states of h_t = f(h_{t-1} @ W + p_t), t = 1..L, with a hand-written reverse pass.

  The reverse pass runs one loop of δ_t = (h̄_t + δ_{t+1} Wᵀ) ⊙ f'(a_t) (one small
  matmul per step) and forms W̄ = Σ_t h_{t-1}ᵀ δ_t as ONE matmul after the loop,
  where autodiff of `lax.scan` accumulates it step by step (faster than that
  autodiff: docs/rnn.md). A `jax.custom_vjp`: reverse mode only.

  Args:
    transition_HxH: real (H, H) W (row-vector convention: h @ W), float32 or float64.
    h0_BxH: real (B, H) initial state, the same dtype.
    projected_LxBxH: real (L, B, H), the inputs' contributions p_t (time-major).
    activation: 'relu', 'tanh' or 'identity'.
    unroll: steps per loop iteration (forward and reverse loops).

  Returns:
    Real (L, B, H), the inputs' dtype: h_1..h_L.

  Raises:
    ValueError: on mismatched shapes, no steps (L = 0) or an unknown activation.
  """
  elementwise_activation(activation)
  _check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  return _recurrence(transition_HxH, h0_BxH, projected_LxBxH, activation, unroll)


def modrelu(z, bias, eps: float = _MODRELU_EPS) -> jax.Array:
  """modReLU(z) = relu(|z| + b) z / |z| (Arjovsky et al. 2016), smoothed near z = 0.

  Zero where |z| + b ≤ 0; elsewhere the phase of z kept and the modulus shifted by b.
  |z| is sqrt(|z|² + eps); at z = 0 exactly the output is 0 with derivative 0 (with
  b > 0 the function jumps there; expRNN's real modReLU takes the same value).

  Args:
    z: complex (..., n), complex64 or complex128.
    bias: real (n,) b (broadcast against z's last axis).
    eps: added under the square root of |z|², so that the gradient is finite at 0.

  Returns:
    Complex (..., n), z's dtype.
  """
  norm = jnp.sqrt(jnp.real(z) ** 2 + jnp.imag(z) ** 2 + eps)
  # 0 at z = 0 exactly: the output is 0 either way, the derivative there 0 (see
  # `_modrelu_pre_activations`).
  scale = jnp.where(z != 0, jax.nn.relu(norm + bias) / norm, 0)
  return z * scale.astype(z.dtype)


def modrelu_pairs(pre_Bx2n, bias_n, eps: float = _MODRELU_EPS) -> jax.Array:
  """`modrelu` on complex vectors held as real pairs [Re z, Im z].

  Args:
    pre_Bx2n: real (..., 2n): the first n entries are Re z, the last n Im z.
    bias_n: real (n,) b.
    eps: added under the square root of |z|², so that the gradient is finite at 0.

  Returns:
    Real (..., 2n), [Re, Im] of modReLU(z), pre_Bx2n's dtype.
  """
  n = bias_n.shape[-1]
  x, y = pre_Bx2n[..., :n], pre_Bx2n[..., n:]
  norm = jnp.sqrt(x ** 2 + y ** 2 + eps)
  # 0 at z = 0 exactly, as `modrelu`.
  scale = jnp.where((x != 0) | (y != 0), jax.nn.relu(norm + bias_n) / norm, 0)
  return pre_Bx2n * _pairs(scale)


def _modrelu_step(h, p, transition, bias):
  """One modReLU step -> (h_t, r_t): the state and each unit's r = sqrt(|z|² + eps)."""
  n = bias.shape[-1]
  pre = h @ transition + p
  r = jnp.sqrt(pre[..., :n] ** 2 + pre[..., n:] ** 2 + _MODRELU_EPS)
  scale = jax.nn.relu(r + bias) / r
  return pre * _pairs(scale), r


def _modrelu_recurrence_forward(transition, h0, projected, bias, unroll, keep_r=False):
  def body(h, p):
    h, r = _modrelu_step(h, p, transition, bias)
    return h, (h, r) if keep_r else h

  return _loop(body, h0, projected, unroll=unroll)[1]


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _modrelu_recurrence(transition, h0, projected, bias, unroll):
  return _modrelu_recurrence_forward(transition, h0, projected, bias, unroll)


def _modrelu_recurrence_fwd(transition, h0, projected, bias, unroll):
  # The reverse pass needs each unit's r (B·n per step, half a state): saved, rather
  # than recomputing the pre-activations with a second (L·B, H) @ (H, H) matmul.
  hs, rs = _modrelu_recurrence_forward(transition, h0, projected, bias, unroll, keep_r=True)
  return hs, (transition, h0, hs, rs, bias)


def _modrelu_pre_activations(hs, rs, bias):
  """From saved states and moduli, the per-unit factors of modReLU's Jacobian.

  Per complex unit z = (x, y), r = sqrt(x² + y² + eps), s = relu(r + b) / r and
  out = s z: Jᵀ v = s v + coef · z (z·v) with coef = (1 - s) / r² (J is symmetric),
  and ∂out/∂b · v = 1 / r · (z·v), where the unit is active: r + b > 0 and out ≠ 0.
  Elsewhere s = coef = 0 and b̄'s term is 0, so z may be anything (0 here). At z = 0
  exactly (a state that zero inputs keep at 0) modReLU with b > 0 jumps from 0 to
  modulus b; its derivative there is taken as 0, as for `real_modrelu` and PyTorch's
  sign(z)·relu(|z| + b): the smoothed one, 1 + b/sqrt(eps) ≈ 4 for b = 0.01, would
  grow the cotangent 4× a step through every such step (to inf over a blank image
  row). No matmul: the pre-activations come back from h and r alone.

  Args:
    hs: real (..., H), H = 2n: modReLU's outputs [Re, Im] (the reverse loop passes
      one step's (B, H)).
    rs: real (..., n): each unit's r (the forward loop saves it).
    bias: real (n,) b.

  Returns:
    ``(z, s, coef, active)``: z real (..., H) as [Re, Im] pairs; s and coef real
    (..., n); active bool (..., n).
  """
  n = bias.shape[-1]
  nonzero = (hs[..., :n] != 0) | (hs[..., n:] != 0)
  active = (rs + bias > 0) & nonzero
  s = jnp.where(active, jax.nn.relu(rs + bias) / rs, 0)
  pre = hs / _pairs(jnp.where(active, s, 1))
  coef = jnp.where(active, (1 - s) / (rs * rs), 0)
  return pre, s, coef, active


def _modrelu_recurrence_bwd(unroll, res, ct_hs):
  transition, h0, hs, rs, bias = res
  n = bias.shape[-1]
  transition_t = transition.T

  def body(carry, inputs):
    delta_next, ct_bias = carry
    ct_h, h, r = inputs
    # The Jacobian's factors from this step's state and moduli, inside the loop where
    # they are in cache: no passes over (L, B, H) arrays before or after it (3-12% of
    # the kernel's time at L = 784, B = 64, n = 116 on one CPU core).
    z, s, coef, active = _modrelu_pre_activations(h, r, bias)
    v = ct_h + delta_next @ transition_t
    zv = z[..., :n] * v[..., :n] + z[..., n:] * v[..., n:]
    delta = _pairs(s) * v + _pairs(coef * zv) * z
    # b̄ = Σ_{t, batch} 1[active] / r · (z·v).
    ct_bias = ct_bias + jnp.sum(jnp.where(active, zv / r, 0), axis=0)
    return (delta, ct_bias), delta

  (_, ct_bias), deltas = _loop(body, (jnp.zeros_like(h0), jnp.zeros_like(bias)),
                               (ct_hs, hs, rs), reverse=True, unroll=unroll)
  return _transition_cotangent(h0, hs, deltas), deltas[0] @ transition_t, deltas, ct_bias


_modrelu_recurrence.defvjp(_modrelu_recurrence_fwd, _modrelu_recurrence_bwd)


def modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_n,
                       unroll: int = 1) -> jax.Array:
  """All states of h_t = modReLU(h_{t-1} @ W + p_t), t = 1..L, with a hand-written reverse pass.

  The states are complex vectors of n units held as real pairs [Re h, Im h] (H = 2n),
  and modReLU acts on each complex unit (`modrelu_pairs`, eps = 1e-5). The forward
  loop also saves each unit's modulus r (half a state per step), from which the
  reverse pass recovers the pre-activations step by step without a second matmul; it
  runs one loop of δ_t = Jᵀ(h̄_t + δ_{t+1} Wᵀ) (J the modReLU Jacobian, symmetric per
  unit), summing b̄ as it goes, and forms W̄ = Σ_t h_{t-1}ᵀ δ_t as ONE matmul after it.
  A `jax.custom_vjp`: reverse mode only.

  Args:
    transition_HxH: real (H, H) W, H = 2n (row-vector convention: h @ W), float32 or
      float64; for a unitary U acting as h ↦ U h, the block matrix [[Re Uᵀ, Im Uᵀ],
      [-Im Uᵀ, Re Uᵀ]].
    h0_BxH: real (B, H) initial state [Re h_0, Im h_0], the same dtype.
    projected_LxBxH: real (L, B, H), the inputs' contributions p_t (time-major).
    bias_n: real (n,), the modReLU bias of each complex unit.
    unroll: steps per loop iteration (forward and reverse loops).

  Returns:
    Real (L, B, H), the inputs' dtype: h_1..h_L as [Re, Im] pairs.

  Raises:
    ValueError: on mismatched shapes (including a bias that is not (H / 2,)) or no
      steps (L = 0).
  """
  _check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  if bias_n.ndim != 1 or 2 * bias_n.shape[0] != transition_HxH.shape[-1]:
    raise ValueError(f"expected a bias (H / 2,) for states (B, H); got {bias_n.shape=}, "
                     f"{h0_BxH.shape=}.")
  return _modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_n, unroll)


def real_modrelu(z, bias) -> jax.Array:
  """modReLU on real numbers, as expRNN: sign(z) · relu(|z| + b).

  Zero where |z| + b ≤ 0 (and at z = 0); elsewhere z's sign kept and |z| shifted by b.

  Args:
    z: real (..., n), float32 or float64.
    bias: real (n,) b, broadcast against z's last axis.

  Returns:
    Real (..., n), the promoted dtype of z and b.
  """
  return jnp.sign(z) * jax.nn.relu(jnp.abs(z) + bias)


def _real_modrelu_forward(transition, h0, projected, bias, unroll):
  def body(h, p):
    h = real_modrelu(h @ transition + p, bias)
    return h, h

  return _loop(body, h0, projected, unroll=unroll)[1]


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _real_modrelu_recurrence(transition, h0, projected, bias, unroll):
  return _real_modrelu_forward(transition, h0, projected, bias, unroll)


def _real_modrelu_recurrence_fwd(transition, h0, projected, bias, unroll):
  hs = _real_modrelu_forward(transition, h0, projected, bias, unroll)
  return hs, (transition, h0, hs)


def _real_modrelu_recurrence_bwd(unroll, res, ct_hs):
  transition, h0, hs = res
  transition_t = transition.T

  def body(delta_next, inputs):
    ct_h, h = inputs
    # d h / d z = 1 exactly where h ≠ 0 (what autodiff of `real_modrelu` gives).
    delta = jnp.where(h != 0, ct_h + delta_next @ transition_t, 0)
    return delta, delta

  delta_first, deltas = _loop(body, jnp.zeros_like(h0), (ct_hs, hs), reverse=True,
                              unroll=unroll)
  # d h / d b = sign(z) where h ≠ 0, i.e. sign(h); δ is already zero elsewhere.
  ct_bias = jnp.einsum("lbh,lbh->h", jnp.sign(hs), deltas)
  return (_transition_cotangent(h0, hs, deltas), delta_first @ transition_t, deltas,
          ct_bias)


_real_modrelu_recurrence.defvjp(_real_modrelu_recurrence_fwd, _real_modrelu_recurrence_bwd)


def real_modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_H,
                            unroll: int = 1) -> jax.Array:
  """All states of h_t = real_modrelu(h_{t-1} @ W + p_t, b), t = 1..L, hand-written reverse.

  The recurrence of expRNN's orthogonal RNN. The reverse pass needs only the saved
  states (the modReLU's derivative is 1 where h_t ≠ 0 and 0 elsewhere; its derivative
  in b is sign(h_t)): one loop of δ_t = 1[h_t ≠ 0] ⊙ (h̄_t + δ_{t+1} Wᵀ), then W̄ as ONE
  matmul and b̄ as one sum after the loop, as `elementwise_recurrence`.
  A `jax.custom_vjp`: reverse mode only.

  Args:
    transition_HxH: real (H, H) W (row-vector convention: h @ W), float32 or float64.
    h0_BxH: real (B, H) initial state, the same dtype.
    projected_LxBxH: real (L, B, H), the inputs' contributions p_t (time-major).
    bias_H: real (H,), the modReLU bias b.
    unroll: steps per loop iteration (forward and reverse loops).

  Returns:
    Real (L, B, H), the inputs' dtype: h_1..h_L.

  Raises:
    ValueError: on mismatched shapes (including a bias that is not (H,)) or no steps
      (L = 0).
  """
  _check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  if bias_H.shape != h0_BxH.shape[-1:]:
    raise ValueError(f"expected a bias (H,) for states (B, H); got {bias_H.shape=}, "
                     f"{h0_BxH.shape=}.")
  return _real_modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_H, unroll)
