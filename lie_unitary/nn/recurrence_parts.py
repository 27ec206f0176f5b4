"""The pieces both implementations of the recurrence kernels share.

`lie_unitary.nn.recurrence` runs the loops over time with `lax.scan`,
`lie_unitary.nn.fused_recurrence` inside Pallas kernels; both compute the same maths
with the same hand-written reverse pass, and take from here what must agree between
them: the checks of their arguments, modReLU's eps, the derivative of each elementwise
activation written in its output, and the cotangents formed after the reverse loop
(W̄ = Σ_t h_{t-1}ᵀ δ_t as one matmul, h̄_0, and modReLU's bias cotangent).

Pure functions of arrays. Letters in names: B batch, L steps, H state size (2n for
complex pairs), n complex units.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = [
    "MODRELU_EPS",
    "activation_derivative_from_output",
    "check_modrelu_shapes",
    "check_recurrence_shapes",
    "modrelu_offloop_cotangents",
    "modrelu_pre_activations",
    "transition_cotangent",
]

# Added under the square root of |z|² in modReLU: finite gradients at z = 0.
MODRELU_EPS = 1e-5

_DERIVATIVES_FROM_OUTPUT = {
    "relu": lambda h: (h > 0).astype(h.dtype),
    "tanh": lambda h: 1 - h * h,
    "identity": jnp.ones_like,
}


def activation_derivative_from_output(name: str, h) -> jax.Array:
  """f'(a) written in the activation's output h = f(a), elementwise.

  relu: 1 where h > 0, else 0 (the derivative at a = 0 taken as 0); tanh: 1 - h²;
  identity: 1. The reverse loops need no pre-activations a.

  Args:
    name: 'relu', 'tanh' or 'identity' (`recurrence.elementwise_activation`'s names).
    h: real array of any shape, f's output.

  Returns:
    Real array of h's shape and dtype.

  Raises:
    ValueError: on an unknown name.
  """
  if name not in _DERIVATIVES_FROM_OUTPUT:
    raise ValueError(
        f"unknown activation {name!r}; choose from {sorted(_DERIVATIVES_FROM_OUTPUT)}.")
  return _DERIVATIVES_FROM_OUTPUT[name](h)


def check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH) -> None:
  """Checks the shapes of a recurrence's W (H, H), h_0 (B, H) and inputs p (L, B, H).

  Only shapes are read (arrays or anything with ``.shape`` and ``.ndim``, tracers
  included), so the check runs at trace time under `jax.jit`.

  Raises:
    ValueError: naming the three shapes, if they are not (H, H), (B, H), (L, B, H).
  """
  H = transition_HxH.shape[-1]
  if (transition_HxH.shape != (H, H) or h0_BxH.ndim != 2 or h0_BxH.shape[-1] != H
      or projected_LxBxH.ndim != 3 or projected_LxBxH.shape[1:] != h0_BxH.shape):
    raise ValueError(f"expected (H, H), (B, H), (L, B, H); got {transition_HxH.shape=}, "
                     f"{h0_BxH.shape=}, {projected_LxBxH.shape=}.")


def check_modrelu_shapes(transition_HxH, h0_BxH, projected_LxBxH, bias_n) -> None:
  """`check_recurrence_shapes`, and a modReLU bias of shape (H / 2,): one per complex unit.

  Raises:
    ValueError: on mismatched shapes, including a bias that is not (H / 2,).
  """
  check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  if bias_n.ndim != 1 or 2 * bias_n.shape[0] != transition_HxH.shape[-1]:
    raise ValueError(f"expected a bias (H / 2,) for states (B, H); got {bias_n.shape=}, "
                     f"{h0_BxH.shape=}.")


def transition_cotangent(h0_BxH, hs_LxBxH, deltas_LxBxH) -> jax.Array:
  """W̄ = Σ_t h_{t-1}ᵀ δ_t, t = 1..L, for h_t = f(h_{t-1} @ W + p_t).

  Formed as h_0ᵀ δ_1 plus ONE (H, (L-1)·B) @ ((L-1)·B, H) matmul: XLA's CPU dot runs
  this 2-D product faster than an einsum contracting the two axes L and B
  (docs/rnn.md has the timing).

  Args:
    h0_BxH: real (B, H), the initial state h_0.
    hs_LxBxH: real (L, B, H), the states h_1..h_L (only h_1..h_{L-1} are read).
    deltas_LxBxH: real (L, B, H), the pre-activation cotangents δ_1..δ_L.

  Returns:
    Real (H, H), the dtype of the inputs' products.
  """
  H = h0_BxH.shape[-1]
  return (h0_BxH.T @ deltas_LxBxH[0]
          + hs_LxBxH[:-1].reshape(-1, H).T @ deltas_LxBxH[1:].reshape(-1, H))


def _pairs(a):
  """[a, a] on the last axis: one value per complex unit, for its Re and Im halves."""
  return jnp.concatenate([a, a], axis=-1)


def modrelu_pre_activations(hs_LxBxH, rs_LxBxn, bias_n):
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
    hs_LxBxH: real (..., H), H = 2n: modReLU's outputs [Re, Im].
    rs_LxBxn: real (..., n): each unit's r (the forward loop saves it).
    bias_n: real (n,) b.

  Returns:
    ``(z, s, coef, active)``: z real (..., H) as [Re, Im] pairs; s and coef real
    (..., n); active bool (..., n).
  """
  n = bias_n.shape[-1]
  nonzero = (hs_LxBxH[..., :n] != 0) | (hs_LxBxH[..., n:] != 0)
  active = (rs_LxBxn + bias_n > 0) & nonzero
  s = jnp.where(active, jax.nn.relu(rs_LxBxn + bias_n) / rs_LxBxn, 0)
  pre = hs_LxBxH / _pairs(jnp.where(active, s, 1))
  coef = jnp.where(active, (1 - s) / (rs_LxBxn * rs_LxBxn), 0)
  return pre, s, coef, active


def modrelu_offloop_cotangents(transition_HxH, h0_BxH, hs_LxBxH, rs_LxBxn, bias_n,
                               deltas_LxBxH):
  """The cotangents of a modReLU recurrence that come after its reverse loop.

  For h_t = modReLU(h_{t-1} @ W + p_t) with δ_t the cotangents of the pre-activations
  (the reverse loop's output): W̄ = Σ_t h_{t-1}ᵀ δ_t (`transition_cotangent`),
  h̄_0 = δ_1 Wᵀ, p̄_t = δ_t and b̄ = Σ_{t, batch} 1[r + b > 0] / r · (z·v), where the
  z·v of each unit is read off δ (z·δ = (z·v)(s + coef |z|²)), so the loop has one
  output only.

  Args:
    transition_HxH: real (H, H) W, H = 2n.
    h0_BxH: real (B, H) h_0.
    hs_LxBxH: real (L, B, H), the states h_1..h_L as [Re, Im] pairs.
    rs_LxBxn: real (L, B, n), each unit's r = sqrt(|z|² + eps) at every step.
    bias_n: real (n,) b.
    deltas_LxBxH: real (L, B, H), δ_1..δ_L.

  Returns:
    ``(W̄, h̄_0, p̄, b̄)``: real (H, H), (B, H), (L, B, H) and (n,).
  """
  n = bias_n.shape[-1]
  pre, s, coef, active = modrelu_pre_activations(hs_LxBxH, rs_LxBxn, bias_n)
  # z·δ = (z·v)(s + coef |z|²), |z|² = r² - eps: z·v from the loop's output, off the loop.
  zd = pre[..., :n] * deltas_LxBxH[..., :n] + pre[..., n:] * deltas_LxBxH[..., n:]
  # (s + coef |z|² > 0 where active; inactive units divide by 1 and are dropped.)
  gain = jnp.where(active, s + coef * (rs_LxBxn * rs_LxBxn - MODRELU_EPS), 1) * rs_LxBxn
  ct_bias = jnp.sum(jnp.where(active, zd / gain, 0), axis=(0, 1))
  return (transition_cotangent(h0_BxH, hs_LxBxH, deltas_LxBxH),
          deltas_LxBxH[0] @ transition_HxH.T, deltas_LxBxH, ct_bias)
