"""Recurrent cells (guRNN, ruRNN, IRNN, tanh RNN) and a sequence model (paper §4, SPEC §4).

Every cell is a flax `nn.RNNCellBase` with `initialize_carry(rng, input_shape)` and
`__call__(carry, x_t) -> (carry, y_t)`, so `nn.RNN(cell)` scans it. Each also splits
its step in three: `transition()` (per-forward-pass constants: the guRNN's β·U(λ) as a
real 2n×2n block matrix, one eigh), `project_inputs(x)` (V x + b, for all steps at
once) and `step(carry, projected_t, transition)` (the recurrence proper).
`SequenceModel` calls the first two ONCE per batch of sequences and scans only
`step`, so a forward pass has one eigh and the backward pass sums the per-step
cotangents of U before one spectral VJP. (`__call__`, used by `nn.RNN`, forms U at
every step: correct, but T eighs per sequence batch.)

The cells' states are real. Complex states (guRNN, ruRNN) are held as real pairs
[Re h, Im h] of size 2n, as the original code did (SPEC §2: trainable leaves are real).

Letters in names: B batch, L steps, D input features, H state size, K outputs.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import composition, expm

__all__ = [
    "GURNNCell", "SimpleRNNCell", "SequenceModel", "URNNCell", "diagonal_phases_init",
    "elementwise_recurrence", "modrelu",
]

Initializer = Callable[..., jax.Array]
_ACTIVATIONS = {"relu": nn.relu, "tanh": jnp.tanh, "identity": lambda x: x}


def _activation(name: str):
  if name not in _ACTIVATIONS:
    raise ValueError(f"unknown activation {name!r}; choose from {sorted(_ACTIVATIONS)}.")
  return _ACTIVATIONS[name]


def _activation_derivative_from_output(name: str, h):
  """f'(a) written in h = f(a): relu (h > 0), tanh 1 - h², identity 1."""
  if name == "relu":
    return (h > 0).astype(h.dtype)
  if name == "tanh":
    return 1 - h * h
  return jnp.ones_like(h)


def _recurrence_forward(transition, h0, projected, activation, unroll):
  f = _activation(activation)

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
  fprime = _activation_derivative_from_output(activation, hs)
  transition_t = transition.T

  def body(delta_next, inputs):
    ct_h, d = inputs
    delta = (ct_h + delta_next @ transition_t) * d
    return delta, delta

  delta_first, deltas = jax.lax.scan(body, jnp.zeros_like(h0), (ct_hs, fprime),
                                     reverse=True, unroll=unroll)
  # W̄ = Σ_t h_{t-1}ᵀ δ_t as one (H, L·B) @ (L·B, H) matmul: XLA's CPU dot is ~2.5×
  # faster on this 2-D form than on the einsum contracting two axes (measured).
  H = h0.shape[-1]
  ct_transition = (h0.T @ deltas[0]
                   + hs[:-1].reshape(-1, H).T @ deltas[1:].reshape(-1, H))
  return ct_transition, delta_first @ transition_t, deltas


_recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)


def elementwise_recurrence(transition_HxH, h0_BxH, projected_LxBxH, activation: str = "relu",
                           unroll: int = 1) -> jax.Array:
  """All states of h_t = f(h_{t-1} @ W + p_t), t = 1..L, with a hand-written reverse pass.

  The reverse pass runs one loop of δ_t = (h̄_t + δ_{t+1} Wᵀ) ⊙ f'(a_t) (one small
  matmul per step) and forms W̄ = Σ_t h_{t-1}ᵀ δ_t as ONE matmul after the loop,
  where autodiff of `lax.scan` accumulates it step by step (measured ~20-25% faster
  for the whole recurrence at L = 100, B = 20, H = 60 on 2 CPU cores).
  A `jax.custom_vjp`: reverse mode only.

  Args:
    transition_HxH: real (H, H) W (row-vector convention: h @ W).
    h0_BxH: real (B, H) initial state.
    projected_LxBxH: real (L, B, H), the inputs' contributions p_t (time-major).
    activation: 'relu', 'tanh' or 'identity'.
    unroll: steps per loop iteration.

  Returns:
    Real (L, B, H): h_1..h_L.

  Raises:
    ValueError: on mismatched shapes or an unknown activation.
  """
  _activation(activation)
  H = transition_HxH.shape[-1]
  if (transition_HxH.shape != (H, H) or h0_BxH.ndim != 2 or h0_BxH.shape[-1] != H
      or projected_LxBxH.ndim != 3 or projected_LxBxH.shape[1:] != h0_BxH.shape):
    raise ValueError(f"expected (H, H), (B, H), (L, B, H); got {transition_HxH.shape=}, "
                     f"{h0_BxH.shape=}, {projected_LxBxH.shape=}.")
  return _recurrence(transition_HxH, h0_BxH, projected_LxBxH, activation, unroll)


def _uniform_h0(rng, shape, scale, dtype):
  return jax.random.uniform(rng, shape, dtype, -scale, scale)


def _halves(init: Initializer) -> Initializer:
  """Initializer of a (D, 2n) kernel [A | B] with A and B drawn as two (D, n) kernels."""

  def initializer(key, shape, dtype=jnp.float32):
    k_re, k_im = jax.random.split(key)
    half = (*shape[:-1], shape[-1] // 2)
    return jnp.concatenate([init(k_re, half, dtype), init(k_im, half, dtype)], -1)

  return initializer


def diagonal_phases_init(minval: float = -math.pi, maxval: float = math.pi) -> Initializer:
  """Initializer of λ (n²,) giving U = diag(e^{iθ}), θ ~ U(minval, maxval) (Henaff et al.).

  The n diagonal coefficients (the first n in `lie_unitary.basis` order) are the
  phases θ; all others are 0. A unitary analogue of the block-rotation init that
  later orthogonal-RNN work (Henaff et al. 2016, expRNN) uses on the copy task:
  every complex unit starts as an independent, norm-preserving rotation.

  Returns:
    An initializer `(key, shape, dtype) -> λ`; raises ValueError if `shape` is not
    (n²,) for an integer n.
  """

  def initializer(key, shape, dtype=jnp.float32):
    n = math.isqrt(shape[-1]) if len(shape) == 1 else -1
    if n < 1 or n * n != shape[-1]:
      raise ValueError(f"λ must have shape (n²,); got {shape}.")
    theta = jax.random.uniform(key, (n,), dtype, minval, maxval)
    return jnp.concatenate([theta, jnp.zeros((n * n - n,), dtype)])

  return initializer


_MODRELU_EPS = 1e-5  # under the square root of |z|²: finite gradients at z = 0


def _modrelu_pairs(pre_BxH, bias_n, eps: float = _MODRELU_EPS):
  """modReLU on a complex vector held as real pairs [Re z, Im z] (..., 2n)."""
  n = bias_n.shape[-1]
  norm = jnp.sqrt(pre_BxH[..., :n] ** 2 + pre_BxH[..., n:] ** 2 + eps)
  scale = nn.relu(norm + bias_n) / norm
  return pre_BxH * jnp.concatenate([scale, scale], axis=-1)


def _modrelu_recurrence_forward(transition, h0, projected, bias, unroll):
  def body(h, p):
    h = _modrelu_pairs(h @ transition + p, bias)
    return h, h

  return jax.lax.scan(body, h0, projected, unroll=unroll)[1]


@functools.partial(jax.custom_vjp, nondiff_argnums=(4,))
def _modrelu_recurrence(transition, h0, projected, bias, unroll):
  return _modrelu_recurrence_forward(transition, h0, projected, bias, unroll)


def _modrelu_recurrence_fwd(transition, h0, projected, bias, unroll):
  hs = _modrelu_recurrence_forward(transition, h0, projected, bias, unroll)
  return hs, (transition, h0, hs, projected, bias)


def _modrelu_recurrence_bwd(unroll, res, ct_hs):
  # Per complex unit z = (x, y), r = sqrt(x² + y² + eps), s = relu(r + b) / r, out = s z:
  # Jᵀ v = s v + (1[r + b > 0] - s) / r² · z (z·v) (J is symmetric), and
  # ∂out/∂b · v = 1[r + b > 0] / r · (z·v). The pre-activations are recomputed from hs.
  transition, h0, hs, projected, bias = res
  n = bias.shape[-1]
  h_prev = jnp.concatenate([h0[None], hs[:-1]], axis=0)
  pre = h_prev @ transition + projected  # (L, B, 2n): one batched matmul, off the loop
  r = jnp.sqrt(pre[..., :n] ** 2 + pre[..., n:] ** 2 + _MODRELU_EPS)
  active = (r + bias > 0).astype(pre.dtype)
  s = nn.relu(r + bias) / r
  coef = (active - s) / (r * r)
  transition_t = transition.T

  def body(delta_next, inputs):
    ct_h, z, s_t, coef_t = inputs
    v = ct_h + delta_next @ transition_t
    zv = z[..., :n] * v[..., :n] + z[..., n:] * v[..., n:]
    two = lambda a: jnp.concatenate([a, a], axis=-1)
    delta = two(s_t) * v + two(coef_t * zv) * z
    return delta, (delta, zv)

  delta_first, (deltas, zvs) = jax.lax.scan(body, jnp.zeros_like(h0), (ct_hs, pre, s, coef),
                                            reverse=True, unroll=unroll)
  H = h0.shape[-1]
  ct_transition = h_prev.reshape(-1, H).T @ deltas.reshape(-1, H)
  ct_bias = jnp.sum(active / r * zvs, axis=(0, 1))
  return ct_transition, delta_first @ transition_t, deltas, ct_bias


_modrelu_recurrence.defvjp(_modrelu_recurrence_fwd, _modrelu_recurrence_bwd)


def _complex_block(u) -> jax.Array:
  """M (2n, 2n) real with [a, b] @ M = [Re, Im] of (a + ib) @ uᵀ, i.e. of U h."""
  a, b = jnp.real(u).T, jnp.imag(u).T
  return jnp.block([[a, b], [-b, a]])


class _ComplexPairState:
  """Carry of [Re h, Im h] (2n reals), U(±sqrt(3/(2n))) at random or zeros (``h0``)."""

  @nn.nowrap
  def initialize_carry(self, rng, input_shape):
    """(..., 2n) initial state for inputs of shape (..., D): random or zeros."""
    shape = tuple(input_shape[:-1]) + (2 * self.features,)
    if self.h0 == "zeros":
      return jnp.zeros(shape, self.param_dtype)
    return _uniform_h0(rng, shape, math.sqrt(3.0 / (2 * self.features)), self.param_dtype)

  @property
  def num_feature_axes(self) -> int:
    return 1


class _ElementwiseRecurrence:
  """`step` and `scan` for cells whose recurrence is h = f(h_prev @ transition + projected)."""

  def step(self, carry_BxH, projected_BxH, transition):
    """h = f(h_prev @ transition + projected): the recurrence proper, (..., H) -> (..., H)."""
    h = _activation(self.activation)(carry_BxH @ transition + projected_BxH)
    return h, h

  def scan(self, carry_BxH, projected_LxBxH, transition, unroll: int = 1):
    """All steps at once (time-major), with the fast reverse pass of
    `elementwise_recurrence`: -> (final carry (B, H), outputs (L, B, H))."""
    hs = elementwise_recurrence(transition, carry_BxH, projected_LxBxH, self.activation,
                                unroll)
    return hs[-1], hs


class GURNNCell(_ComplexPairState, _ElementwiseRecurrence, nn.RNNCellBase):
  """The general unitary RNN cell: h_t = f(β U h_{t-1} + V x_t + b), U = U(λ).

  The state is real of size 2n, [Re h, Im h]; U acts as the complex product (the real
  block matrix [[Re U, -Im U], [Im U, Re U]]), with no transition bias. The input
  enters through V_re, V_im held as one real Dense layer ``v`` with kernel
  [V_re | V_im] (D, 2n) (each half Glorot-uniform as a (D, n) matrix) and zero bias,
  and f acts elementwise on the 2n real vector (SPEC §4, as the original code).
  Beyond the paper, f = 'modrelu' acts on each complex unit (Arjovsky et al.'s
  modReLU, with a bias ``modrelu_bias`` (n,) ~ U(±0.01)): it keeps the phase and,
  where |z| + b > 0, nearly the modulus, so a unitary U can carry a state over
  thousands of steps (the copy task at T = 1000).

  Attributes:
    features: n, the number of complex units (state size 2n, n² coefficients λ).
    beta: the scale β of U (1 for guRNN₁; 1.4 adding / 1.05 memory for guRNN_β).
    activation: 'relu', 'tanh', 'identity' (elementwise on the 2n reals) or
      'modrelu' (per complex unit, with its own hand-written reverse pass; a
      training step took 1.7x relu's at T = 100, n = 30, batch 20).
    h0: 'random' (U(±sqrt(3/(2n))) per sequence, from the key given to
      `initialize_carry`: pass a fresh key per forward pass) or 'zeros'.
    unconstrained: replace U by a free real 2n×2n matrix (orthogonal init): the same
      recurrence without the unitary constraint, the speed limit of this cell.
    lambda_init: initializer of λ (n²,), N(0, 1) by default as the paper.
    kernel_init: initializer of V_re and V_im.
    param_dtype: float32 (U complex64) or float64.
  """
  features: int
  beta: float = 1.0
  activation: str = "relu"
  h0: str = "random"
  unconstrained: bool = False
  lambda_init: Initializer = nn.initializers.normal(stddev=1.0)
  kernel_init: Initializer = nn.initializers.glorot_uniform()
  param_dtype: Any = jnp.float32

  def setup(self):
    if self.features < 1:
      raise ValueError(f"features must be ≥ 1; got {self.features}.")
    if self.h0 not in ("random", "zeros"):
      raise ValueError(f"h0 must be 'random' or 'zeros'; got {self.h0!r}.")
    n = self.features
    if self.activation == "modrelu":
      self.modrelu_bias = self.param(
          "modrelu_bias", lambda k, shape, dtype: jax.random.uniform(k, shape, dtype, -0.01, 0.01),
          (n,), self.param_dtype)
    else:
      _activation(self.activation)
    if self.unconstrained:
      self.w = self.param("w", nn.initializers.orthogonal(), (2 * n, 2 * n), self.param_dtype)
    else:
      self.lam = self.param("lam", self.lambda_init, (n * n,), self.param_dtype)
    # V = [V_re | V_im] as ONE (D, 2n) kernel, each half initialised as its own
    # (D, n) matrix: one matmul gives [Re, Im] with no concatenation of outputs.
    self.v = nn.Dense(2 * n, kernel_init=_halves(self.kernel_init),
                      param_dtype=self.param_dtype, name="v")

  def unitary(self) -> jax.Array:
    """U(λ), complex (n, n). Only for the constrained cell."""
    if self.unconstrained:
      raise ValueError("an unconstrained GURNNCell has no unitary matrix.")
    return expm.unitary_from_lambdas(self.lam)

  def transition(self) -> jax.Array:
    """β M, real (2n, 2n), with h_BxH @ (β M) = β U h: one eigh, once per forward pass."""
    m = self.w if self.unconstrained else _complex_block(self.unitary())
    return (self.beta * m).astype(self.param_dtype)

  def project_inputs(self, x_BxD):
    """[V_re x + b_re, V_im x + b_im]: real (..., D) -> (..., 2n); any leading axes."""
    return self.v(x_BxD)

  def step(self, carry_BxH, projected_BxH, transition):
    """h = f(h_prev @ transition + projected), f elementwise or modReLU per unit."""
    if self.activation != "modrelu":
      return super().step(carry_BxH, projected_BxH, transition)
    h = _modrelu_pairs(carry_BxH @ transition + projected_BxH, self.modrelu_bias)
    return h, h

  def scan(self, carry_BxH, projected_LxBxH, transition, unroll: int = 1):
    """All steps (time-major) -> (final carry (B, H), outputs (L, B, H)), each
    activation through a loop with a hand-written reverse pass (W̄ as one matmul)."""
    if self.activation != "modrelu":
      return super().scan(carry_BxH, projected_LxBxH, transition, unroll)
    hs = _modrelu_recurrence(transition, carry_BxH, projected_LxBxH, self.modrelu_bias, unroll)
    return hs[-1], hs

  def __call__(self, carry_BxH, x_BxD):
    """One step. carry (..., 2n) real, x (..., D) real -> (new carry, output = new carry).

    Forms U(λ) (one eigh) at every call: `SequenceModel` instead calls `transition`
    and `project_inputs` once per sequence batch and scans `step`.
    """
    return self.step(carry_BxH, self.project_inputs(x_BxD), self.transition())


def modrelu(z, bias, eps: float = _MODRELU_EPS) -> jax.Array:
  """modReLU(z) = relu(|z| + b) z / |z| (Arjovsky et al. 2016), smooth at z = 0.

  Args:
    z: complex (..., n).
    bias: real (n,).
    eps: added under the square root of |z|², so that the gradient is finite at 0.

  Returns:
    Complex (..., n).
  """
  norm = jnp.sqrt(jnp.real(z) ** 2 + jnp.imag(z) ** 2 + eps)
  return z * (nn.relu(norm + bias) / norm).astype(z.dtype)


class URNNCell(_ComplexPairState, nn.RNNCellBase):
  """Arjovsky et al.'s restricted unitary RNN (ruRNN): h_t = modReLU(U h_{t-1} + V x_t).

  U = D3 R2 F⁻¹ D2 Π R1 F D1 (7n reals, applied in O(n log n) by
  `lie_unitary.arjovsky_apply`); V complex (n, D) held as one real Dense kernel
  [Re V | Im V] (D, 2n) without bias; modReLU bias ~ U(±0.01). The complex state is held as real pairs
  [Re h, Im h] (..., 2n). Angles ~ U(-π, π), reflections ~ U(±sqrt(6/(2+2n))), Π a
  fixed random permutation drawn from `permutation_seed` (a constant, not a parameter).

  Attributes:
    features: n, the number of complex units.
    h0: 'random' (U(±sqrt(3/(2n))) per sequence, from the carry key) or 'zeros'.
    permutation_seed: seed of Π.
    kernel_init: initializer of V's real and imaginary parts.
    param_dtype: float32 or float64.
  """
  features: int
  h0: str = "random"
  permutation_seed: int = 0
  kernel_init: Initializer = nn.initializers.glorot_uniform()
  param_dtype: Any = jnp.float32

  def setup(self):
    if self.h0 not in ("random", "zeros"):
      raise ValueError(f"h0 must be 'random' or 'zeros'; got {self.h0!r}.")
    n = self.features
    s = math.sqrt(6.0 / (2.0 + 2.0 * n))
    uniform = lambda lo, hi: lambda k, shape, dtype: jax.random.uniform(k, shape, dtype, lo, hi)
    self.angles = self.param("angles", uniform(-math.pi, math.pi), (3, n), self.param_dtype)
    self.reflections_re = self.param("reflections_re", uniform(-s, s), (2, n), self.param_dtype)
    self.reflections_im = self.param("reflections_im", uniform(-s, s), (2, n), self.param_dtype)
    self.bias = self.param("bias", uniform(-0.01, 0.01), (n,), self.param_dtype)
    self.v = nn.Dense(2 * n, use_bias=False, kernel_init=_halves(self.kernel_init),
                      param_dtype=self.param_dtype, name="v")

  def transition(self):
    """Nothing to precompute: U is applied as a product of O(n) factors at each step."""
    return None

  def project_inputs(self, x_BxD):
    """[Re, Im] of V x: real (..., D) -> (..., 2n); any leading axes."""
    return self.v(x_BxD)

  def step(self, carry_BxH, projected_BxH, transition=None):
    """h = modReLU(U h_prev + V x) from the projected input, (..., 2n) -> (..., 2n)."""
    del transition
    n = self.features
    h = jax.lax.complex(carry_BxH[..., :n], carry_BxH[..., n:])
    perm = jnp.asarray(np.random.RandomState(self.permutation_seed).permutation(n), jnp.int32)
    uh = composition.arjovsky_apply(h, self.angles, self.reflections_re, self.reflections_im,
                                    perm)
    vx = jax.lax.complex(projected_BxH[..., :n], projected_BxH[..., n:])
    z = modrelu(uh + vx, self.bias)
    out = jnp.concatenate([jnp.real(z), jnp.imag(z)], axis=-1)
    return out, out

  def __call__(self, carry_BxH, x_BxD):
    """One step. carry (..., 2n) real, x (..., D) real -> (new carry, output = new carry)."""
    return self.step(carry_BxH, self.project_inputs(x_BxD))


class SimpleRNNCell(_ElementwiseRecurrence, nn.RNNCellBase):
  """h_t = f(W h_{t-1} + V x_t + b), real: the IRNN and the tanh RNN.

  IRNN (Le et al. 2015): f = relu, W = I at init, V ~ N(0, 0.001²)
  (`SimpleRNNCell.irnn(n)`). tanh RNN: f = tanh, W orthogonal, V Glorot-uniform
  (`SimpleRNNCell.tanh_rnn(n)`). The initial state is zeros.

  Attributes:
    features: n, the state size.
    activation: 'relu', 'tanh' or 'identity'.
    recurrent_init: initializer of W (n, n).
    kernel_init: initializer of V (D, n).
    param_dtype: float32 or float64.
  """
  features: int
  activation: str = "tanh"
  recurrent_init: Initializer = nn.initializers.orthogonal()
  kernel_init: Initializer = nn.initializers.glorot_uniform()
  param_dtype: Any = jnp.float32

  @nn.nowrap
  @classmethod
  def irnn(cls, features: int, **kwargs) -> "SimpleRNNCell":
    return cls(features, "relu", _identity_init,
               nn.initializers.normal(stddev=1e-3), **kwargs)

  @nn.nowrap
  @classmethod
  def tanh_rnn(cls, features: int, **kwargs) -> "SimpleRNNCell":
    return cls(features, "tanh", **kwargs)

  def setup(self):
    _activation(self.activation)
    self.w = self.param("w", self.recurrent_init, (self.features, self.features),
                        self.param_dtype)
    self.v = nn.Dense(self.features, kernel_init=self.kernel_init,
                      param_dtype=self.param_dtype, name="v")

  def transition(self):
    """W (n, n)."""
    return self.w

  def project_inputs(self, x_BxD):
    """V x + b: real (..., D) -> (..., n); any leading axes."""
    return self.v(x_BxD)

  def __call__(self, carry_BxH, x_BxD):
    """One step. carry (..., n), x (..., D) real -> (new carry, output = new carry)."""
    return self.step(carry_BxH, self.project_inputs(x_BxD), self.transition())

  @nn.nowrap
  def initialize_carry(self, rng, input_shape):
    del rng
    return jnp.zeros(tuple(input_shape[:-1]) + (self.features,), self.param_dtype)

  @property
  def num_feature_axes(self) -> int:
    return 1


def _identity_init(key, shape, dtype=jnp.float32):
  del key
  return jnp.eye(shape[0], shape[1], dtype=dtype)


def _cell_body(cell, carry, x_BxD):
  return cell(carry, x_BxD)


def _step_body(cell, carry, projected_BxH, transition):
  return cell.step(carry, projected_BxH, transition)


def _has_fast_path(cell) -> bool:
  return all(hasattr(cell, m) for m in ("transition", "project_inputs", "step"))


class SequenceModel(nn.Module):
  """A cell scanned over a sequence, then a linear readout (with bias) of its outputs.

  Cells of this module: `transition()` and `project_inputs()` run once per call; the
  guRNN, `free`, IRNN and tanh RNN then run `elementwise_recurrence` (hand-written
  reverse pass), the ruRNN `nn.scan` over `step` with the transition broadcast. Any
  other `nn.RNNCellBase` (flax's LSTM cells) is `nn.scan`-ed as is.
  `readout='last'` maps the last step's output to (B, K) (adding); `readout='all'`
  maps every step's output to (B, L, K) (memory).

  Attributes:
    cell: an `nn.RNNCellBase` (any of this module's cells, or flax's LSTM cells).
    num_outputs: K.
    readout: 'last' or 'all'.
    unroll: time steps per iteration of the compiled loop (`nn.scan`'s unroll).
  """
  cell: nn.RNNCellBase
  num_outputs: int
  readout: str = "last"
  unroll: int = 1

  @nn.compact
  def __call__(self, x_BxLxD, carry_key=None):
    """Runs the model.

    Args:
      x_BxLxD: real inputs (B, L, D).
      carry_key: PRNG key of the initial state (used by cells with a random h0):
        pass a fresh one per training step and a fixed one for evaluation. Required
        when the cell draws a random initial state.

    Returns:
      (B, K) for readout 'last', (B, L, K) for 'all'.

    Raises:
      ValueError: on a bad readout, input rank, or a random h0 without a key.
    """
    if self.readout not in ("last", "all"):
      raise ValueError(f"readout must be 'last' or 'all'; got {self.readout!r}.")
    if x_BxLxD.ndim != 3:
      raise ValueError(f"inputs must be (B, L, D); got {x_BxLxD.shape=}.")
    if carry_key is None:
      if getattr(self.cell, "h0", "zeros") == "random":
        raise ValueError("this cell draws a random initial state: pass carry_key.")
      carry_key = jax.random.key(0)  # unused by zero-state cells
    carry = self.cell.initialize_carry(carry_key, x_BxLxD[:, 0].shape)
    if _has_fast_path(self.cell):
      # Per forward pass, not per step: the transition (the guRNN's U: one eigh) and
      # the input projection of all steps at once; the scan runs only the recurrence.
      transition = self.cell.transition()
      # Time-major before projecting: transposing (B, L, D) is cheaper than (B, L, H).
      projected_LxBxH = self.cell.project_inputs(jnp.swapaxes(x_BxLxD, 0, 1))
      if hasattr(self.cell, "scan") and carry.ndim == 2:  # the cell's own all-steps loop
        carry, y_LxBxH = self.cell.scan(carry, projected_LxBxH, transition, self.unroll)
        return self._readout(y_LxBxH)
      scan = nn.scan(_step_body, variable_broadcast="params", split_rngs={"params": False},
                     in_axes=(0, nn.broadcast), out_axes=0, unroll=self.unroll)
      carry, y_LxBxH = scan(self.cell, carry, projected_LxBxH, transition)
    else:  # any other nn.RNNCellBase (flax's LSTM cells)
      scan = nn.scan(_cell_body, variable_broadcast="params", split_rngs={"params": False},
                     in_axes=0, out_axes=0, unroll=self.unroll)
      carry, y_LxBxH = scan(self.cell, carry, jnp.swapaxes(x_BxLxD, 0, 1))
    return self._readout(y_LxBxH)

  def _readout(self, y_LxBxH):
    dense = nn.Dense(self.num_outputs, name="readout")
    if self.readout == "last":
      return dense(y_LxBxH[-1])
    return jnp.swapaxes(dense(y_LxBxH), 0, 1)
