"""Fused recurrence kernels in Pallas: the whole loop over time inside one kernel.

The same maths as `lie_unitary.nn.recurrence` (and the same hand-written reverse
passes), for accelerators where `lax.scan` is launch-bound: a scan issues several small
kernels per time step, so at batch 20-128 a GPU mostly waits. Here one Pallas kernel
runs all L steps of the forward loop, and one runs all L steps of the reverse loop;
each program of the kernel's grid owns a block of the batch, keeps its state on chip
and reads W from cache at every step. W̄ = Σ_t h_{t-1}ᵀ δ_t, h̄_0 and the modReLU
bias's cotangent are formed after the loop by XLA, exactly as the scan kernels do.

Shapes are padded for the kernels (batch to a multiple of the block, the state to a
power of two ≥ 16: Triton's tensor sizes) with zeros that stay zero through both loops
(f(0) = 0 for relu, tanh and identity, and modReLU(0) = 0), then cut back.

The products run in full float32 (`Precision.HIGHEST`): Triton's float32 default is
TF32, whose ~1e-3 relative error a recurrence compounds over its steps.

On CPU the kernels run in Pallas' interpret mode: correct (the tests run there) but
slow; use the scan kernels on CPU. Written for (and selecting) the Triton backend of
`pallas_call` on GPU; on TPU use the scan kernels (a compiled call there raises
ValueError).

Letters in names: B batch, L steps, H state size (2n for complex pairs), n complex units.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from lie_unitary.nn import recurrence

__all__ = ["fused_elementwise_recurrence", "fused_modrelu_recurrence"]

_MIN_SIZE = 16  # Triton's dot needs every dimension ≥ 16
# Full float32 products (Triton's default for float32 is TF32, ~1e-3 relative error,
# which a recurrence compounds over its steps); float64 is always full precision.
_dot = functools.partial(jnp.dot, precision=jax.lax.Precision.HIGHEST)


def _padded_size(size: int) -> int:
  return max(_MIN_SIZE, pl.next_power_of_2(size))


def _batch_block(batch: int, block_batch: int | None) -> int:
  if block_batch is None:
    return min(32, _padded_size(batch))
  if block_batch < _MIN_SIZE or block_batch & (block_batch - 1):
    raise ValueError(f"block_batch must be a power of two ≥ {_MIN_SIZE}; got {block_batch}.")
  return block_batch


def _interpret(interpret: bool | None) -> bool:
  # Pallas compiles for GPU and TPU only; on CPU it interprets.
  backend = jax.default_backend()
  if interpret is None:
    interpret = backend == "cpu"
  if not interpret and backend not in ("gpu", "cuda", "rocm"):
    raise ValueError(f"the fused recurrence kernels compile for GPUs (Pallas' Triton "
                     f"backend) only; on {backend!r} use the scan kernels (kernel='scan') "
                     "or interpret=True.")
  return interpret


def _call(kernel, interpret, **kwargs):
  # Triton explicitly: newer jax may pick Mosaic GPU for a bare pallas_call, whose rules
  # (warpgroup-sized copies, no dot_general at lane semantics) these kernels do not meet.
  return pl.pallas_call(kernel, interpret=interpret,
                        compiler_params=pltriton.CompilerParams(num_warps=4), **kwargs)


def _pad(a, axis: int, size: int):
  widths = [(0, 0)] * a.ndim
  widths[axis] = (0, size - a.shape[axis])
  return jnp.pad(a, widths)


def _pad_pairs(a, axis: int, n_padded: int):
  """[Re | Im] halves of `axis`, each padded to n_padded: [Re, 0, Im, 0]."""
  re, im = jnp.split(a, 2, axis=axis)
  return jnp.concatenate([_pad(re, axis, n_padded), _pad(im, axis, n_padded)], axis=axis)


def _unpad_pairs(a, n: int):
  n_padded = a.shape[-1] // 2
  return jnp.concatenate([a[..., :n], a[..., n_padded:n_padded + n]], axis=-1)


def _specs(L, bb, width):
  """BlockSpecs: W whole (width, width); a batch block of h0; (L, bb, ·) sequence blocks."""
  square = pl.BlockSpec((width, width), lambda b: (0, 0))
  rows = pl.BlockSpec((bb, width), lambda b: (b, 0))
  seq = lambda w: pl.BlockSpec((L, bb, w), lambda b: (0, b, 0))
  return square, rows, seq


# Elementwise activations ----------------------------------------------------------------


def _elementwise_forward_kernel(w_ref, h0_ref, p_ref, hs_ref, *, activation):
  f = recurrence.elementwise_activation(activation)

  def body(t, h):
    h = f(_dot(h, w_ref[...]) + p_ref[t])
    hs_ref[t] = h
    return h

  jax.lax.fori_loop(0, p_ref.shape[0], body, h0_ref[...])


def _elementwise_reverse_kernel(wt_ref, ct_ref, hs_ref, deltas_ref, *, activation):
  L = ct_ref.shape[0]

  def body(i, delta_next):
    t = L - 1 - i
    delta = (ct_ref[t] + _dot(delta_next, wt_ref[...])) * (
        recurrence._activation_derivative_from_output(activation, hs_ref[t]))
    deltas_ref[t] = delta
    return delta

  jax.lax.fori_loop(0, L, body, jnp.zeros(deltas_ref.shape[1:], deltas_ref.dtype))


def _elementwise_call(kernel, L, Bp, Hp, bb, dtype, interpret, with_h0):
  square, rows, seq = _specs(L, bb, Hp)
  in_specs = [square, rows, seq(Hp)] if with_h0 else [square, seq(Hp), seq(Hp)]
  return _call(kernel, interpret, out_shape=jax.ShapeDtypeStruct((L, Bp, Hp), dtype),
               grid=(Bp // bb,), in_specs=in_specs, out_specs=seq(Hp))


def _pad_elementwise(transition, h0, projected, bb):
  B, H = h0.shape
  Bp, Hp = -(-B // bb) * bb, _padded_size(H)
  w = _pad(_pad(transition, 0, Hp), 1, Hp)
  return w, _pad(_pad(h0, 0, Bp), 1, Hp), _pad(_pad(projected, 1, Bp), 2, Hp)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _fused(transition, h0, projected, activation, bb, interpret):
  return _fused_fwd(transition, h0, projected, activation, bb, interpret)[0]


def _fused_fwd(transition, h0, projected, activation, bb, interpret):
  (B, H), L = h0.shape, projected.shape[0]
  w, h0p, pp = _pad_elementwise(transition, h0, projected, bb)
  kernel = functools.partial(_elementwise_forward_kernel, activation=activation)
  hs_padded = _elementwise_call(kernel, L, *pp.shape[1:], bb, pp.dtype, interpret,
                                with_h0=True)(w, h0p, pp)
  return hs_padded[:, :B, :H], (transition, h0, hs_padded)


def _fused_bwd(activation, bb, interpret, res, ct_hs):
  transition, h0, hs_padded = res
  (B, H), (L, Bp, Hp) = h0.shape, hs_padded.shape
  hs = hs_padded[:, :B, :H]
  wt = _pad(_pad(transition.T, 0, Hp), 1, Hp)
  ct = _pad(_pad(ct_hs, 1, Bp), 2, Hp)
  kernel = functools.partial(_elementwise_reverse_kernel, activation=activation)
  deltas = _elementwise_call(kernel, L, Bp, Hp, bb, ct.dtype, interpret,
                             with_h0=False)(wt, ct, hs_padded)[:, :B, :H]
  return (recurrence._transition_cotangent(h0, hs, deltas), deltas[0] @ transition.T,
          deltas)


_fused.defvjp(_fused_fwd, _fused_bwd)


def fused_elementwise_recurrence(transition_HxH, h0_BxH, projected_LxBxH,
                                 activation: str = "relu", *, block_batch: int | None = None,
                                 interpret: bool | None = None) -> jax.Array:
  """`recurrence.elementwise_recurrence` with each loop over time in one Pallas kernel.

  h_t = f(h_{t-1} @ W + p_t), t = 1..L; the same hand-written reverse pass (one loop of
  δ_t = (h̄_t + δ_{t+1} Wᵀ) ⊙ f'(a_t), here one kernel; W̄ as one matmul after it).
  A `jax.custom_vjp`: reverse mode only. Works under `jax.vmap` and `jax.jit`.

  Args:
    transition_HxH: real (H, H) W (row-vector convention), float32 or float64.
    h0_BxH: real (B, H) initial state, the same dtype.
    projected_LxBxH: real (L, B, H), the inputs' contributions p_t (time-major).
    activation: 'relu', 'tanh' or 'identity'.
    block_batch: batch rows per kernel program, a power of two ≥ 16 (default:
      min(32, B rounded up)); the batch is padded to a multiple of it.
    interpret: run Pallas in interpret mode; default: on CPU only.

  Returns:
    Real (L, B, H), the inputs' dtype: h_1..h_L.

  Raises:
    ValueError: on mismatched shapes, an unknown activation, a bad block_batch, or a
      compiled (not interpreted) call on a backend other than GPU.
  """
  recurrence.elementwise_activation(activation)
  recurrence._check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  bb = _batch_block(h0_BxH.shape[0], block_batch)
  return _fused(transition_HxH, h0_BxH, projected_LxBxH, activation, bb,
                _interpret(interpret))


# modReLU -----------------------------------------------------------------------------------


def _modrelu_forward_kernel(w_ref, bias_ref, h0_ref, p_ref, hs_ref, rs_ref):
  # The state is held as its halves x = Re h, y = Im h (Triton cannot slice a value,
  # only a ref), so the 2n × 2n product is four n × n ones.
  n = rs_ref.shape[-1]
  bias = bias_ref[...]

  def body(t, carry):
    x, y = carry
    a = _dot(x, w_ref[:n, :n]) + _dot(y, w_ref[n:, :n]) + p_ref[t, :, :n]
    c = _dot(x, w_ref[:n, n:]) + _dot(y, w_ref[n:, n:]) + p_ref[t, :, n:]
    r = jnp.sqrt(a * a + c * c + recurrence._MODRELU_EPS)
    s = jnp.maximum(r + bias, 0) / r
    x, y = a * s, c * s
    hs_ref[t, :, :n] = x
    hs_ref[t, :, n:] = y
    rs_ref[t] = r
    return x, y

  jax.lax.fori_loop(0, p_ref.shape[0], body, (h0_ref[:, :n], h0_ref[:, n:]))


def _modrelu_reverse_kernel(wt_ref, bias_ref, ct_ref, hs_ref, rs_ref, deltas_ref):
  # Per unit: δ = s v + coef (z·v) z, as `recurrence.modrelu_recurrence`'s reverse loop.
  L, n = rs_ref.shape[0], rs_ref.shape[-1]
  bias = bias_ref[...]

  def body(i, carry):
    t = L - 1 - i
    dx, dy = carry
    vx = ct_ref[t, :, :n] + _dot(dx, wt_ref[:n, :n]) + _dot(dy, wt_ref[n:, :n])
    vy = ct_ref[t, :, n:] + _dot(dx, wt_ref[:n, n:]) + _dot(dy, wt_ref[n:, n:])
    r = rs_ref[t]
    active = r + bias > 0
    s = jnp.maximum(r + bias, 0) / r
    safe_s = jnp.where(active, s, 1)
    zx, zy = hs_ref[t, :, :n] / safe_s, hs_ref[t, :, n:] / safe_s
    coef = (active.astype(r.dtype) - s) / (r * r)
    czv = coef * (zx * vx + zy * vy)
    dx, dy = s * vx + czv * zx, s * vy + czv * zy
    deltas_ref[t, :, :n] = dx
    deltas_ref[t, :, n:] = dy
    return dx, dy

  zeros = jnp.zeros((deltas_ref.shape[1], n), deltas_ref.dtype)
  jax.lax.fori_loop(0, L, body, (zeros, zeros))


def _pad_modrelu(transition, h0, projected, bias, bb):
  (B, H), n = h0.shape, bias.shape[0]
  Bp, n_padded = -(-B // bb) * bb, _padded_size(n)
  w = _pad_pairs(_pad_pairs(transition, 0, n_padded), 1, n_padded)
  bias_p = _pad(bias, 0, n_padded)[None]
  return (w, bias_p, _pad(_pad_pairs(h0, 1, n_padded), 0, Bp),
          _pad(_pad_pairs(projected, 2, n_padded), 1, Bp))


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _fused_modrelu(transition, h0, projected, bias, bb, interpret):
  return _fused_modrelu_fwd(transition, h0, projected, bias, bb, interpret)[0]


def _fused_modrelu_fwd(transition, h0, projected, bias, bb, interpret):
  B, n, L = h0.shape[0], bias.shape[0], projected.shape[0]
  w, bias_p, h0p, pp = _pad_modrelu(transition, h0, projected, bias, bb)
  Bp, Hp = pp.shape[1:]
  square, rows, seq = _specs(L, bb, Hp)
  vector = pl.BlockSpec(bias_p.shape, lambda b: (0, 0))
  hs_padded, rs_padded = _call(
      _modrelu_forward_kernel, interpret,
      out_shape=(jax.ShapeDtypeStruct((L, Bp, Hp), pp.dtype),
                 jax.ShapeDtypeStruct((L, Bp, Hp // 2), pp.dtype)),
      grid=(Bp // bb,), in_specs=[square, vector, rows, seq(Hp)],
      out_specs=(seq(Hp), seq(Hp // 2)))(w, bias_p, h0p, pp)
  return _unpad_pairs(hs_padded[:, :B], n), (transition, h0, hs_padded, rs_padded, bias)


def _fused_modrelu_bwd(bb, interpret, res, ct_hs):
  transition, h0, hs_padded, rs_padded, bias = res
  B, n, (L, Bp, Hp) = h0.shape[0], bias.shape[0], hs_padded.shape
  wt = _pad_pairs(_pad_pairs(transition.T, 0, Hp // 2), 1, Hp // 2)
  bias_p = _pad(bias, 0, Hp // 2)[None]
  ct = _pad(_pad_pairs(ct_hs, 2, Hp // 2), 1, Bp)
  square, _, seq = _specs(L, bb, Hp)
  vector = pl.BlockSpec(bias_p.shape, lambda b: (0, 0))
  deltas_padded = _call(
      _modrelu_reverse_kernel, interpret, out_shape=jax.ShapeDtypeStruct((L, Bp, Hp), ct.dtype),
      grid=(Bp // bb,), in_specs=[square, vector, seq(Hp), seq(Hp), seq(Hp // 2)],
      out_specs=seq(Hp))(wt, bias_p, ct, hs_padded, rs_padded)
  deltas = _unpad_pairs(deltas_padded[:, :B], n)
  hs, rs = _unpad_pairs(hs_padded[:, :B], n), rs_padded[:, :B, :n]
  return recurrence._modrelu_offloop_cotangents(transition, h0, hs, rs, bias, deltas)


_fused_modrelu.defvjp(_fused_modrelu_fwd, _fused_modrelu_bwd)


def fused_modrelu_recurrence(transition_HxH, h0_BxH, projected_LxBxH, bias_n, *,
                             block_batch: int | None = None,
                             interpret: bool | None = None) -> jax.Array:
  """`recurrence.modrelu_recurrence` with each loop over time in one Pallas kernel.

  h_t = modReLU(h_{t-1} @ W + p_t) on complex units held as real pairs [Re h, Im h]
  (H = 2n); the same hand-written reverse pass (the reverse loop in one kernel; W̄ and
  b̄ after it). A `jax.custom_vjp`: reverse mode only. Works under `jax.vmap` and `jax.jit`.

  Args:
    transition_HxH: real (H, H) W, H = 2n (row-vector convention), float32 or float64.
    h0_BxH: real (B, H) initial state [Re h_0, Im h_0], the same dtype.
    projected_LxBxH: real (L, B, H), the inputs' contributions p_t (time-major).
    bias_n: real (n,), the modReLU bias of each complex unit.
    block_batch: batch rows per kernel program, a power of two ≥ 16 (default:
      min(32, B rounded up)); the batch is padded to a multiple of it.
    interpret: run Pallas in interpret mode; default: on CPU only.

  Returns:
    Real (L, B, H), the inputs' dtype: h_1..h_L as [Re, Im] pairs.

  Raises:
    ValueError: on mismatched shapes (a bias that is not (H / 2,) included), a bad
      block_batch, or a compiled (not interpreted) call on a backend other than GPU.
  """
  recurrence._check_modrelu_shapes(transition_HxH, h0_BxH, projected_LxBxH, bias_n)
  bb = _batch_block(h0_BxH.shape[0], block_batch)
  return _fused_modrelu(transition_HxH, h0_BxH, projected_LxBxH, bias_n, bb,
                        _interpret(interpret))
