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

from lie_unitary.nn import recurrence_parts as parts

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
    delta = (ct_h + delta_next @ transition_t) * parts.activation_derivative_from_output(
        activation, h)
    return delta, delta

  delta_first, deltas = jax.lax.scan(body, jnp.zeros_like(h0), (ct_hs, hs),
                                     reverse=True, unroll=unroll)
  return parts.transition_cotangent(h0, hs, deltas), delta_first @ transition_t, deltas


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
    ValueError: on mismatched shapes or an unknown activation.
  """
  elementwise_activation(activation)
  parts.check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  return _recurrence(transition_HxH, h0_BxH, projected_LxBxH, activation, unroll)


def modrelu(z, bias, eps: float = parts.MODRELU_EPS) -> jax.Array:
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
  # `recurrence_parts.modrelu_pre_activations`).
  scale = jnp.where(z != 0, jax.nn.relu(norm + bias) / norm, 0)
  return z * scale.astype(z.dtype)


def modrelu_pairs(pre_Bx2n, bias_n, eps: float = parts.MODRELU_EPS) -> jax.Array:
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
  return pre_Bx2n * jnp.concatenate([scale, scale], axis=-1)


def _modrelu_step(h, p, transition, bias):
  """One modReLU step -> (h_t, r_t): the state and each unit's r = sqrt(|z|² + eps)."""
  n = bias.shape[-1]
  pre = h @ transition + p
  r = jnp.sqrt(pre[..., :n] ** 2 + pre[..., n:] ** 2 + parts.MODRELU_EPS)
  scale = jax.nn.relu(r + bias) / r
  return pre * jnp.concatenate([scale, scale], axis=-1), r


def _modrelu_recurrence_forward(transition, h0, projected, bias, unroll, keep_r=False):
  def body(h, p):
    h, r = _modrelu_step(h, p, transition, bias)
    return h, (h, r) if keep_r else h

  return jax.lax.scan(body, h0, projected, unroll=unroll)[1]


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _modrelu_recurrence(transition, h0, projected, bias, unroll):
  return _modrelu_recurrence_forward(transition, h0, projected, bias, unroll)


def _modrelu_recurrence_fwd(transition, h0, projected, bias, unroll):
  # The reverse pass needs each unit's r (B·n per step, half a state): saved, rather
  # than recomputing the pre-activations with a second (L·B, H) @ (H, H) matmul.
  hs, rs = _modrelu_recurrence_forward(transition, h0, projected, bias, unroll, keep_r=True)
  return hs, (transition, h0, hs, rs, bias)


def _modrelu_recurrence_bwd(unroll, res, ct_hs):
  transition, h0, hs, rs, bias = res
  n = bias.shape[-1]
  transition_t = transition.T
  two = lambda a: jnp.concatenate([a, a], axis=-1)
  pre, s, coef, _ = parts.modrelu_pre_activations(hs, rs, bias)

  def body(delta_next, inputs):
    ct_h, z, s_t, coef_t = inputs
    v = ct_h + delta_next @ transition_t
    zv = z[..., :n] * v[..., :n] + z[..., n:] * v[..., n:]
    delta = two(s_t) * v + two(coef_t * zv) * z
    return delta, delta

  _, deltas = jax.lax.scan(body, jnp.zeros_like(h0), (ct_hs, pre, s, coef),
                           reverse=True, unroll=unroll)
  return parts.modrelu_offloop_cotangents(transition, h0, hs, rs, bias, deltas)


_modrelu_recurrence.defvjp(_modrelu_recurrence_fwd, _modrelu_recurrence_bwd)


def modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_n,
                       unroll: int = 1) -> jax.Array:
  """All states of h_t = modReLU(h_{t-1} @ W + p_t), t = 1..L, with a hand-written reverse pass.

  The states are complex vectors of n units held as real pairs [Re h, Im h] (H = 2n),
  and modReLU acts on each complex unit (`modrelu_pairs`, eps = 1e-5). The forward
  loop also saves each unit's modulus r (half a state per step), from which the
  reverse pass recovers the pre-activations without a second matmul; it runs one loop
  of δ_t = Jᵀ(h̄_t + δ_{t+1} Wᵀ) (J the modReLU Jacobian, symmetric per unit) and forms
  W̄ = Σ_t h_{t-1}ᵀ δ_t as ONE matmul after the loop, and b̄ as one sum off the loop.
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
    ValueError: on mismatched shapes, including a bias that is not (H / 2,).
  """
  parts.check_modrelu_shapes(transition_HxH, h0_BxH, projected_LxBxH, bias_n)
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

  return jax.lax.scan(body, h0, projected, unroll=unroll)[1]


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

  delta_first, deltas = jax.lax.scan(body, jnp.zeros_like(h0), (ct_hs, hs),
                                     reverse=True, unroll=unroll)
  # d h / d b = sign(z) where h ≠ 0, i.e. sign(h); δ is already zero elsewhere.
  ct_bias = jnp.einsum("lbh,lbh->h", jnp.sign(hs), deltas)
  return (parts.transition_cotangent(h0, hs, deltas), delta_first @ transition_t, deltas,
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
    ValueError: on mismatched shapes, including a bias that is not (H,).
  """
  parts.check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  if bias_H.shape != h0_BxH.shape[-1:]:
    raise ValueError(f"expected a bias (H,) for states (B, H); got {bias_H.shape=}, "
                     f"{h0_BxH.shape=}.")
  return _real_modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_H, unroll)
