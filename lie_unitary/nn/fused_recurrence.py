"""Fused recurrence kernels in Pallas: the whole loop over time inside one kernel.

The same maths as `lie_unitary.nn.recurrence` (and the same hand-written reverse
passes), for accelerators where `lax.scan` is launch-bound: a scan issues several small
kernels per time step, so at batch 20-128 a GPU mostly waits. Here one Pallas kernel
runs all L steps of the forward loop, and one runs all L steps of the reverse loop;
each program of the kernel's grid owns a block of the batch, keeps its state on chip
and reads W from cache at every step. W̄ = Σ_t h_{t-1}ᵀ δ_t, h̄_0 and the modReLU
bias's cotangent are formed after the loop by XLA, exactly as the scan kernels do.

Each program holds its state as chunks of C = min(64, H's power of two ≥ 16) columns
and reads W in C × C tiles: a whole W at H = 256 is 256 KiB in float32, more shared
memory than a multiprocessor has. Shapes are padded for the kernels (batch to a
multiple of the block, the state to a multiple of C, Triton's tensor sizes being
powers of two) with zeros that stay zero through both loops (f(0) = 0 for relu, tanh
and identity, and modReLU(0) = 0), then cut back.

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
import operator

import jax
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton
import jax.numpy as jnp

from lie_unitary.nn import recurrence
from lie_unitary.nn import recurrence_parts as parts

__all__ = ["fused_elementwise_recurrence", "fused_modrelu_recurrence"]

_MIN_SIZE = 16  # Triton's dot needs every dimension ≥ 16
_MAX_CHUNK = 64  # the state's chunk width: W is read in tiles of at most 64 × 64
# Full float32 products (Triton's default for float32 is TF32, ~1e-3 relative error,
# which a recurrence compounds over its steps); float64 is always full precision.
_dot = functools.partial(jnp.dot, precision=jax.lax.Precision.HIGHEST)


def _padded_size(size: int) -> int:
  return max(_MIN_SIZE, pl.next_power_of_2(size))


def _chunking(size: int) -> tuple[int, int]:
  """(chunk width C, padded size): C = min(64, size's power of two ≥ 16); size → k·C."""
  chunk = min(_MAX_CHUNK, _padded_size(size))
  return chunk, -(-size // chunk) * chunk


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
  # One stage: software pipelining would buffer every W tile of the step once more.
  return pl.pallas_call(
      kernel, interpret=interpret,
      compiler_params=pltriton.CompilerParams(num_warps=4, num_stages=1), **kwargs)


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


def _columns(width: int, chunk: int) -> list[slice]:
  return [slice(j, j + chunk) for j in range(0, width, chunk)]


def _chunked_product(h, w_ref, cols):
  """(h @ W) chunk by chunk: [Σ_k h[k] @ W[cols[k], cols[j]] for each j].

  The state is a tuple of (bb, C) chunks and W is read in C × C tiles, so no operand
  of a product outgrows a multiprocessor's shared memory (a whole 256 × 256 float32 W
  is 256 KiB) and no value is sliced (Triton slices refs, not values).
  """
  return [functools.reduce(operator.add, [_dot(h[k], w_ref[cols[k], c])
                                          for k in range(len(cols))]) for c in cols]


# Elementwise activations ----------------------------------------------------------------


def _elementwise_forward_kernel(w_ref, h0_ref, p_ref, hs_ref, *, activation, chunk):
  f = recurrence.elementwise_activation(activation)
  cols = _columns(h0_ref.shape[-1], chunk)

  def body(t, h):
    pre = _chunked_product(h, w_ref, cols)
    h = tuple(f(a + p_ref[t, :, c]) for a, c in zip(pre, cols))
    for hj, c in zip(h, cols):
      hs_ref[t, :, c] = hj
    return h

  jax.lax.fori_loop(0, p_ref.shape[0], body, tuple(h0_ref[:, c] for c in cols))


def _elementwise_reverse_kernel(wt_ref, ct_ref, hs_ref, deltas_ref, *, activation, chunk):
  L, cols = ct_ref.shape[0], _columns(ct_ref.shape[-1], chunk)

  def body(i, delta_next):
    t = L - 1 - i
    back = _chunked_product(delta_next, wt_ref, cols)
    delta = tuple((ct_ref[t, :, c] + g) * parts.activation_derivative_from_output(
        activation, hs_ref[t, :, c]) for g, c in zip(back, cols))
    for dj, c in zip(delta, cols):
      deltas_ref[t, :, c] = dj
    return delta

  zeros = jnp.zeros((deltas_ref.shape[1], chunk), deltas_ref.dtype)
  jax.lax.fori_loop(0, L, body, (zeros,) * len(cols))


def _elementwise_call(kernel, L, Bp, Hp, bb, dtype, interpret, with_h0):
  square, rows, seq = _specs(L, bb, Hp)
  in_specs = [square, rows, seq(Hp)] if with_h0 else [square, seq(Hp), seq(Hp)]
  return _call(kernel, interpret, out_shape=jax.ShapeDtypeStruct((L, Bp, Hp), dtype),
               grid=(Bp // bb,), in_specs=in_specs, out_specs=seq(Hp))


def _pad_elementwise(transition, h0, projected, bb, Hp):
  Bp = -(-h0.shape[0] // bb) * bb
  w = _pad(_pad(transition, 0, Hp), 1, Hp)
  return w, _pad(_pad(h0, 0, Bp), 1, Hp), _pad(_pad(projected, 1, Bp), 2, Hp)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _fused(transition, h0, projected, activation, bb, interpret):
  return _fused_fwd(transition, h0, projected, activation, bb, interpret)[0]


def _fused_fwd(transition, h0, projected, activation, bb, interpret):
  (B, H), L = h0.shape, projected.shape[0]
  chunk, Hp = _chunking(H)
  w, h0p, pp = _pad_elementwise(transition, h0, projected, bb, Hp)
  kernel = functools.partial(_elementwise_forward_kernel, activation=activation, chunk=chunk)
  hs_padded = _elementwise_call(kernel, L, *pp.shape[1:], bb, pp.dtype, interpret,
                                with_h0=True)(w, h0p, pp)
  return hs_padded[:, :B, :H], (transition, h0, hs_padded)


def _fused_bwd(activation, bb, interpret, res, ct_hs):
  transition, h0, hs_padded = res
  (B, H), (L, Bp, Hp) = h0.shape, hs_padded.shape
  hs = hs_padded[:, :B, :H]
  wt = _pad(_pad(transition.T, 0, Hp), 1, Hp)
  ct = _pad(_pad(ct_hs, 1, Bp), 2, Hp)
  kernel = functools.partial(_elementwise_reverse_kernel, activation=activation,
                             chunk=_chunking(H)[0])
  deltas = _elementwise_call(kernel, L, Bp, Hp, bb, ct.dtype, interpret,
                             with_h0=False)(wt, ct, hs_padded)[:, :B, :H]
  return (parts.transition_cotangent(h0, hs, deltas), deltas[0] @ transition.T,
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
  parts.check_recurrence_shapes(transition_HxH, h0_BxH, projected_LxBxH)
  bb = _batch_block(h0_BxH.shape[0], block_batch)
  return _fused(transition_HxH, h0_BxH, projected_LxBxH, activation, bb,
                _interpret(interpret))


# modReLU -----------------------------------------------------------------------------------


def _modrelu_forward_kernel(w_ref, bias_ref, h0_ref, p_ref, hs_ref, rs_ref, *, chunk):
  # The state's chunks: first those of x = Re h, then those of y = Im h; unit i of the
  # j-th x chunk pairs with unit i of the j-th y chunk.
  cols = _columns(h0_ref.shape[-1], chunk)
  half = len(cols) // 2

  def body(t, h):
    pre = _chunked_product(h, w_ref, cols)
    xs, ys = [], []
    for j in range(half):
      cx, cy = cols[j], cols[half + j]
      a, c = pre[j] + p_ref[t, :, cx], pre[half + j] + p_ref[t, :, cy]
      r = jnp.sqrt(a * a + c * c + parts.MODRELU_EPS)
      s = jnp.maximum(r + bias_ref[:, cx], 0) / r
      xs.append(a * s)
      ys.append(c * s)
      hs_ref[t, :, cx] = xs[-1]
      hs_ref[t, :, cy] = ys[-1]
      rs_ref[t, :, cx] = r
    return tuple(xs + ys)

  jax.lax.fori_loop(0, p_ref.shape[0], body, tuple(h0_ref[:, c] for c in cols))


def _modrelu_reverse_kernel(wt_ref, bias_ref, ct_ref, hs_ref, rs_ref, deltas_ref, *, chunk):
  # Per unit: δ = s v + coef (z·v) z, as `recurrence.modrelu_recurrence`'s reverse loop.
  L, cols = rs_ref.shape[0], _columns(ct_ref.shape[-1], chunk)
  half = len(cols) // 2

  def body(i, delta_next):
    t = L - 1 - i
    back = _chunked_product(delta_next, wt_ref, cols)
    dxs, dys = [], []
    for j in range(half):
      cx, cy = cols[j], cols[half + j]
      vx, vy = ct_ref[t, :, cx] + back[j], ct_ref[t, :, cy] + back[half + j]
      r, bias = rs_ref[t, :, cx], bias_ref[:, cx]
      hx, hy = hs_ref[t, :, cx], hs_ref[t, :, cy]
      # Derivative 0 at z = 0 exactly (`recurrence_parts.modrelu_pre_activations`).
      active = (r + bias > 0) & ((hx != 0) | (hy != 0))
      s = jnp.where(active, jnp.maximum(r + bias, 0) / r, 0)
      safe_s = jnp.where(active, s, 1)
      zx, zy = hx / safe_s, hy / safe_s
      coef = jnp.where(active, (1 - s) / (r * r), 0)
      czv = coef * (zx * vx + zy * vy)
      dxs.append(s * vx + czv * zx)
      dys.append(s * vy + czv * zy)
      deltas_ref[t, :, cx] = dxs[-1]
      deltas_ref[t, :, cy] = dys[-1]
    return tuple(dxs + dys)

  zeros = jnp.zeros((deltas_ref.shape[1], chunk), deltas_ref.dtype)
  jax.lax.fori_loop(0, L, body, (zeros,) * len(cols))


def _pad_modrelu(transition, h0, projected, bias, bb, n_padded):
  Bp = -(-h0.shape[0] // bb) * bb
  w = _pad_pairs(_pad_pairs(transition, 0, n_padded), 1, n_padded)
  bias_p = _pad(bias, 0, n_padded)[None]
  return (w, bias_p, _pad(_pad_pairs(h0, 1, n_padded), 0, Bp),
          _pad(_pad_pairs(projected, 2, n_padded), 1, Bp))


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _fused_modrelu(transition, h0, projected, bias, bb, interpret):
  return _fused_modrelu_fwd(transition, h0, projected, bias, bb, interpret)[0]


def _fused_modrelu_fwd(transition, h0, projected, bias, bb, interpret):
  B, n, L = h0.shape[0], bias.shape[0], projected.shape[0]
  chunk, n_padded = _chunking(n)
  w, bias_p, h0p, pp = _pad_modrelu(transition, h0, projected, bias, bb, n_padded)
  Bp, Hp = pp.shape[1:]
  square, rows, seq = _specs(L, bb, Hp)
  vector = pl.BlockSpec(bias_p.shape, lambda b: (0, 0))
  hs_padded, rs_padded = _call(
      functools.partial(_modrelu_forward_kernel, chunk=chunk), interpret,
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
      functools.partial(_modrelu_reverse_kernel, chunk=_chunking(n)[0]), interpret,
      out_shape=jax.ShapeDtypeStruct((L, Bp, Hp), ct.dtype),
      grid=(Bp // bb,), in_specs=[square, vector, seq(Hp), seq(Hp), seq(Hp // 2)],
      out_specs=seq(Hp))(wt, bias_p, ct, hs_padded, rs_padded)
  deltas = _unpad_pairs(deltas_padded[:, :B], n)
  hs, rs = _unpad_pairs(hs_padded[:, :B], n), rs_padded[:, :B, :n]
  return parts.modrelu_offloop_cotangents(transition, h0, hs, rs, bias, deltas)


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
  parts.check_modrelu_shapes(transition_HxH, h0_BxH, projected_LxBxH, bias_n)
  bb = _batch_block(h0_BxH.shape[0], block_batch)
  return _fused_modrelu(transition_HxH, h0_BxH, projected_LxBxH, bias_n, bb,
                        _interpret(interpret))
