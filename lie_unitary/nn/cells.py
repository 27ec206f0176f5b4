"""The recurrent cells of paper §4: guRNN, ruRNN, IRNN and tanh RNN, as flax modules.

Each is an `nn.RNNCellBase` (`flax.linen.RNN(cell)` scans it) and follows the fast-path
contract of `lie_unitary.nn.FastPathCell`: `transition()` (per-pass constants, e.g. the
guRNN's β·U(λ) as a real 2n×2n block matrix: one eigh), `project_inputs(x)` and
`step(carry, projected_t, transition)`; the guRNN, IRNN and tanh RNN add `scan(...)`, a
kernel of `lie_unitary.nn.recurrence` (`ScanningCell`). Complex states are held as real
pairs [Re h, Im h] of size 2n, so every trainable leaf is real.

Letters in names: B batch, L steps, D input features, H state size, K outputs.
"""

from __future__ import annotations

import math
from typing import Any
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import algebra
from lie_unitary import composition
from lie_unitary import expm
from lie_unitary import principal_branch
from lie_unitary.nn import recurrence
from lie_unitary.nn import weights
from lie_unitary.nn.weights import BASE_COLLECTION

__all__ = ["BASE_COLLECTION", "GURNN_ACTIVATIONS", "GURNNCell", "H0_INITS", "InputProjection",
           "SimpleRNNCell", "URNNCell", "diagonal_phases_init"]

Initializer = Callable[..., jax.Array]

# GURNNCell's activations: the elementwise ones, and modReLU per complex unit.
GURNN_ACTIVATIONS = recurrence.ELEMENTWISE_ACTIVATIONS + ("modrelu",)
# Initial states of the complex-state cells (GURNNCell, URNNCell).
H0_INITS = ("random", "zeros")


def _uniform(minval: float, maxval: float) -> Initializer:
  """Initializer U(minval, maxval)."""
  return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, minval,
                                                                  maxval)


def _halves(init: Initializer) -> Initializer:
  """Initializer of a (D, 2n) kernel [A | B] with A and B drawn as two (D, n) kernels."""

  def initializer(key, shape, dtype=jnp.float32):
    k_re, k_im = jax.random.split(key)
    half = (*shape[:-1], shape[-1] // 2)
    return jnp.concatenate([init(k_re, half, dtype), init(k_im, half, dtype)], -1)

  return initializer


def diagonal_phases_init(minval: float = -math.pi, maxval: float = math.pi) -> Initializer:
  """Initializer of λ (n²,) giving U = diag(e^{iθ}), θ ~ U(minval, maxval) (Henaff et al.).

  The n diagonal coefficients (the first in `lie_unitary.basis` order) are θ; the rest 0.

  Returns:
    An initializer `(key, shape, dtype) -> λ`; raises ValueError if `shape` is not
    (n²,) for an integer n.

  Raises:
    ValueError: if minval > maxval.
  """
  if not minval <= maxval:
    raise ValueError(f"need minval ≤ maxval; got {minval=}, {maxval=}.")

  def initializer(key, shape, dtype=jnp.float32):
    n = math.isqrt(shape[-1]) if len(shape) == 1 else -1
    if n < 1 or n * n != shape[-1]:
      raise ValueError(f"λ must have shape (n²,); got {shape}.")
    theta = jax.random.uniform(key, (n,), dtype, minval, maxval)
    return jnp.concatenate([theta, jnp.zeros((n * n - n,), dtype)])

  return initializer


def _complex_block(u) -> jax.Array:
  """M (2n, 2n) real with [a, b] @ M = [Re, Im] of (a + ib) @ uᵀ, i.e. of U h."""
  a, b = jnp.real(u).T, jnp.imag(u).T
  return jnp.block([[a, b], [-b, a]])


class InputProjection(nn.Module):
  """x @ V (+ b) over any leading axes: `nn.Dense`'s parameters ("kernel" (D, F), "bias"
  (F,)), initialisers and numbers, except that ONE input feature (D = 1: the image
  tasks' pixels) is scaled, x · V[0], rather than multiplied (`recurrence.project`): its
  reverse pass is then one fused sum over the (L, B, F) cotangent, where a matmul made
  XLA:CPU copy that cotangent transposed first. With `lazy=True` it returns the
  `recurrence.Projection` instead, which the recurrence kernels form a step at a time.

  Attributes:
    features: F.
    use_bias: whether to add b.
    kernel_init, bias_init: as `nn.Dense`'s.
    param_dtype: the parameters' dtype.
  """
  features: int
  use_bias: bool = True
  kernel_init: Initializer = nn.initializers.lecun_normal()
  bias_init: Initializer = nn.initializers.zeros
  param_dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, lazy: bool = False):
    """Real (..., D) -> (..., F); with `lazy`, x (L, B, D) -> a `recurrence.Projection`.
    Raises ValueError for a complex x (the cells' inputs are real), x without a
    non-empty last axis, or features not a positive integer."""
    algebra.check_positive_int(self.features, "features")
    x = jnp.asarray(x)
    if jnp.iscomplexobj(x):
      raise ValueError(f"the cell's input x must be real; got dtype {x.dtype} (pass "
                       f"[Re, Im] as features).")
    if x.ndim < 1 or x.shape[-1] < 1:
      raise ValueError(f"the input x must be (..., D) with D ≥ 1; got {x.shape=}.")
    kernel = self.param("kernel", self.kernel_init, (x.shape[-1], self.features),
                        self.param_dtype)
    bias = (self.param("bias", self.bias_init, (self.features,), self.param_dtype)
            if self.use_bias else None)
    return recurrence.Projection(x, kernel, bias) if lazy else recurrence.project(x, kernel,
                                                                                   bias)


class _RealState:
  """The carry of a real state (..., H), H = features (2·features as [Re, Im] pairs)."""
  _state_factor = 1

  @nn.nowrap
  def initialize_carry(self, rng, input_shape):
    """(..., H) initial state of param_dtype for inputs (..., D): zeros, or with
    h0 = 'random' U(±sqrt(3/H)) drawn from `rng` (pass a fresh key per forward pass)."""
    size = self._state_factor * self.features
    shape = tuple(input_shape[:-1]) + (size,)
    if getattr(self, "h0", "zeros") == "zeros":
      return jnp.zeros(shape, self.param_dtype)
    scale = math.sqrt(3.0 / size)
    return jax.random.uniform(rng, shape, self.param_dtype, -scale, scale)

  @property
  def num_feature_axes(self) -> int:
    """1: the state has one feature axis (the last)."""
    return 1

  def _check_carry(self, carry, projected):
    """The carry `initialize_carry` gives for x: real (..., H), x's batch axes (not broadcast)."""
    size = self._state_factor * self.features
    carry = jnp.asarray(carry)
    if carry.shape[-1:] != (size,) or jnp.iscomplexobj(carry):
      raise ValueError(f"carry must be real (..., {size}) (`initialize_carry`'s); got shape "
                       f"{carry.shape}, dtype {carry.dtype}.")
    if carry.shape[:-1] != projected.shape[:-1]:
      raise ValueError(f"carry's batch axes {carry.shape[:-1]} must be x's "
                       f"{projected.shape[:-1]}; got carry {carry.shape}.")


class _ComplexPairState(_RealState):
  """Carry of [Re h, Im h] (H = 2n reals), U(±sqrt(3/(2n))) at random or zeros (``h0``)."""
  _state_factor = 2


class _ElementwiseRecurrence:
  """`step` and `scan` for cells whose recurrence is h = f(h_prev @ transition + projected)."""

  def step(self, carry_BxH, projected_BxH, transition):
    """h = f(h_prev @ transition + projected): the recurrence proper, (..., H) -> (..., H)."""
    f = recurrence.elementwise_activation(self.activation)
    h = f(carry_BxH @ transition + projected_BxH)
    return h, h

  def scan(self, carry_BxH, projected_LxBxH, transition, unroll: int = 1,
           outputs: bool = True):
    """All steps at once (time-major), with the fast reverse pass of
    `elementwise_recurrence`: -> (final carry (B, H), outputs (L, B, H), or None when
    `outputs` is False)."""
    hs = recurrence.elementwise_recurrence(transition, carry_BxH, projected_LxBxH,
                                           self.activation, unroll, last_only=not outputs)
    return (hs[-1], hs) if outputs else (hs, None)


class GURNNCell(_ComplexPairState, _ElementwiseRecurrence, nn.RNNCellBase):
  """The general unitary RNN cell: h_t = f(β U h_{t-1} + V x_t + b), U = U(λ).

  The state is real (..., 2n), [Re h, Im h]; U acts as the complex product, with no
  transition bias. V = [V_re | V_im] is one real Dense layer ``v`` (D, 2n) (each half
  initialised as a (D, n) matrix) with zero bias; f acts elementwise on the 2n reals
  (paper §4), or with 'modrelu' per complex unit (bias ``modrelu_bias`` (n,) ~ U(±0.01)).

  Attributes:
    features: n, the number of complex units (state size 2n, n² coefficients λ).
    beta: the scale β of U (1 for guRNN₁; 1.4 adding / 1.05 memory for guRNN_β).
    activation: 'relu', 'tanh', 'identity' (elementwise) or 'modrelu' (per unit).
    h0: 'random' (U(±sqrt(3/(2n))) per sequence, from the key given to
      `initialize_carry`: pass a fresh key per forward pass) or 'zeros'.
    unconstrained: replace U by a free real 2n×2n matrix (orthogonal init).
    lambda_init: initializer of λ (n²,), N(0, 1) as the paper.
    kernel_init: initializer of V_re and V_im.
    param_dtype: float32 (U complex64) or float64; half precision raises ValueError
      at `init`.
    rebased: U = U₀ · U(λ), the base U₀ (n, n) complex in the variable collection
      `BASE_COLLECTION` (identity at init; no gradient), moved by the caller with
      `principal_branch.rebase`. Ignored by an unconstrained cell.
    complex_product: how `scan` multiplies by U with modReLU: 'real' (one real 2n × 2n
      product), 'gauss' (three n × n ones; rounds differently) or 'auto'
      (`recurrence.choose_complex_product`: the faster measured). Elementwise
      activations and an unconstrained cell use 'real'.

  Raises (at `init` / `apply`):
    ValueError: features not an integer ≥ 1, an unknown h0, activation or
      complex_product ('gauss' without modReLU or with an unconstrained cell included),
      a complex input, a carry that is not real (..., 2n) with x's batch axes, or
      `unitary()` of an unconstrained cell.
  """
  features: int
  beta: float = 1.0
  activation: str = "relu"
  h0: str = "random"
  unconstrained: bool = False
  lambda_init: Initializer = nn.initializers.normal(stddev=1.0)
  kernel_init: Initializer = nn.initializers.glorot_uniform()
  param_dtype: Any = jnp.float32
  rebased: bool = False
  complex_product: str = "auto"

  def setup(self):
    weights.check_features(self.features)
    if self.h0 not in H0_INITS:
      raise ValueError(f"h0 must be one of {H0_INITS}; got {self.h0!r}.")
    if self.complex_product not in ("auto",) + recurrence.COMPLEX_PRODUCTS:
      raise ValueError(f"complex_product must be one of {('auto',) + recurrence.COMPLEX_PRODUCTS}"
                       f"; got {self.complex_product!r}.")
    if self.complex_product == "gauss" and (self.unconstrained or self.activation != "modrelu"):
      raise ValueError("complex_product='gauss' needs activation='modrelu' and a constrained "
                       "cell (a free matrix has no complex blocks).")
    algebra.check_real_dtype(self.param_dtype, "param_dtype")  # constrained or not
    n = self.features
    if self.activation == "modrelu":
      self.modrelu_bias = self.param("modrelu_bias", _uniform(-0.01, 0.01), (n,),
                                     self.param_dtype)
    elif self.activation not in GURNN_ACTIVATIONS:
      raise ValueError(f"unknown activation {self.activation!r}; choose from "
                       f"{GURNN_ACTIVATIONS}.")
    if self.unconstrained:
      self.w = self.param("w", nn.initializers.orthogonal(), (2 * n, 2 * n), self.param_dtype)
    else:
      self.lam = self.param("lam", self.lambda_init, (n * n,), self.param_dtype)
      if self.rebased:
        self.base = self.variable(BASE_COLLECTION, "base", jnp.eye, n,
                                  dtype=algebra.complex_dtype_for(self.param_dtype))
    self.v = InputProjection(2 * n, kernel_init=_halves(self.kernel_init),
                             param_dtype=self.param_dtype, name="v")

  def unitary(self) -> jax.Array:
    """U(λ) (U₀ · U(λ) when rebased), complex (n, n). Only for the constrained cell."""
    if self.unconstrained:
      raise ValueError("an unconstrained GURNNCell has no unitary matrix.")
    if self.rebased:
      # The base is a constant of the forward pass: only λ carries gradients.
      return principal_branch.rebased_unitary(jax.lax.stop_gradient(self.base.value), self.lam)
    return expm.unitary_from_lambdas(self.lam)

  def transition(self) -> jax.Array:
    """β M, real (2n, 2n), with h_BxH @ (β M) = β U h: one eigh, once per forward pass."""
    m = self.w if self.unconstrained else _complex_block(self.unitary())
    return (self.beta * m).astype(self.param_dtype)

  def project_inputs(self, x_BxD, lazy: bool = False):
    """[V_re x + b_re, V_im x + b_im]: real (..., D) -> (..., 2n); any leading axes (with
    `lazy`, (L, B, D) -> a `recurrence.Projection` for `scan`)."""
    return self.v(x_BxD, lazy=lazy)

  def step(self, carry_BxH, projected_BxH, transition):
    """h = f(h_prev @ transition + projected), f elementwise or modReLU per unit."""
    if self.activation != "modrelu":
      return super().step(carry_BxH, projected_BxH, transition)
    h = recurrence.modrelu_pairs(carry_BxH @ transition + projected_BxH, self.modrelu_bias)
    return h, h

  def scan(self, carry_BxH, projected_LxBxH, transition, unroll: int = 1,
           outputs: bool = True):
    """All steps (time-major) -> (final carry (B, H), outputs (L, B, H) or None)."""
    if self.activation != "modrelu":
      return super().scan(carry_BxH, projected_LxBxH, transition, unroll, outputs)
    hs = recurrence.modrelu_recurrence(transition, carry_BxH, projected_LxBxH,
                                       self.modrelu_bias, unroll, last_only=not outputs,
                                       product=self.resolved_complex_product())
    return (hs[-1], hs) if outputs else (hs, None)

  def resolved_complex_product(self) -> str:
    """'real' or 'gauss': the product `scan` uses (see ``complex_product``)."""
    if self.unconstrained or self.activation != "modrelu":
      return "real"
    if self.complex_product == "auto":
      return recurrence.choose_complex_product(self.features)
    return self.complex_product

  def __call__(self, carry_BxH, x_BxD):
    """One step (one eigh). carry (..., 2n), x (..., D) real -> (new carry, output)."""
    projected = self.project_inputs(x_BxD)  # first: setup's checks of the sizes
    self._check_carry(carry_BxH, projected)
    return self.step(carry_BxH, projected, self.transition())


class URNNCell(_ComplexPairState, nn.RNNCellBase):
  """Arjovsky et al.'s restricted unitary RNN (ruRNN): h_t = modReLU(U h_{t-1} + V x_t).

  U = D3 R2 F⁻¹ D2 Π R1 F D1 (7n reals, `lie_unitary.arjovsky_apply`); V complex (n, D)
  as one real Dense kernel [Re V | Im V] (D, 2n) without bias; modReLU bias ~ U(±0.01);
  state [Re h, Im h] (..., 2n). Angles ~ U(-π, π), reflections ~ U(±sqrt(6/(2+2n))),
  Π a fixed permutation drawn from `permutation_seed`.

  Attributes:
    features: n, the number of complex units.
    h0: 'random' (U(±sqrt(3/(2n))) per sequence, from the carry key) or 'zeros'.
    permutation_seed: seed of Π.
    kernel_init: initializer of V's real and imaginary parts.
    param_dtype: float32 or float64.

  Raises (at `init` / `apply`):
    ValueError: features not an integer ≥ 1, an unknown h0, a complex input, a carry
      that is not real (..., 2n) with x's batch axes, or a param_dtype other than
      float32 and float64.
  """
  features: int
  h0: str = "random"
  permutation_seed: int = 0
  kernel_init: Initializer = nn.initializers.glorot_uniform()
  param_dtype: Any = jnp.float32

  def setup(self):
    n = weights.check_features(self.features)
    algebra.check_real_dtype(self.param_dtype, "param_dtype")
    if self.h0 not in H0_INITS:
      raise ValueError(f"h0 must be one of {H0_INITS}; got {self.h0!r}.")
    s = math.sqrt(6.0 / (2.0 + 2.0 * n))
    self.angles = self.param("angles", _uniform(-math.pi, math.pi), (3, n), self.param_dtype)
    self.reflections_re = self.param("reflections_re", _uniform(-s, s), (2, n), self.param_dtype)
    self.reflections_im = self.param("reflections_im", _uniform(-s, s), (2, n), self.param_dtype)
    self.bias = self.param("bias", _uniform(-0.01, 0.01), (n,), self.param_dtype)
    self.v = InputProjection(2 * n, use_bias=False, kernel_init=_halves(self.kernel_init),
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
    z = recurrence.modrelu(uh + vx, self.bias)
    out = jnp.concatenate([jnp.real(z), jnp.imag(z)], axis=-1)
    return out, out

  def __call__(self, carry_BxH, x_BxD):
    """One step. carry (..., 2n), x (..., D) real -> (new carry, output = new carry)."""
    projected = self.project_inputs(x_BxD)  # first: setup's checks of the sizes
    self._check_carry(carry_BxH, projected)
    return self.step(carry_BxH, projected)


class SimpleRNNCell(_RealState, _ElementwiseRecurrence, nn.RNNCellBase):
  """h_t = f(W h_{t-1} + V x_t + b), real, zero initial state: the IRNN and tanh RNN.

  IRNN (Le et al. 2015, `SimpleRNNCell.irnn(n)`): relu, W = I, V ~ N(0, 0.001²).
  tanh RNN (`SimpleRNNCell.tanh_rnn(n)`): tanh, W orthogonal, V Glorot-uniform.

  Attributes:
    features: n, the state size.
    activation: 'relu', 'tanh' or 'identity'.
    recurrent_init: initializer of W (n, n).
    kernel_init: initializer of V (D, n).
    param_dtype: float32 or float64.

  Raises (at `init` / `apply`):
    ValueError: features not an integer ≥ 1, an unknown activation, a complex input, a
      carry that is not real (..., n) with x's batch axes, or a param_dtype other than
      float32 and float64.
  """
  features: int
  activation: str = "tanh"
  recurrent_init: Initializer = nn.initializers.orthogonal()
  kernel_init: Initializer = nn.initializers.glorot_uniform()
  param_dtype: Any = jnp.float32

  @nn.nowrap
  @classmethod
  def irnn(cls, features: int, **kwargs) -> "SimpleRNNCell":
    """The IRNN of size `features`: relu, W = I, V ~ N(0, 0.001²); kwargs: the class's
    other fields (bias_init, h0, param_dtype)."""
    return cls(features, "relu", _identity_init,
               nn.initializers.normal(stddev=1e-3), **kwargs)

  @nn.nowrap
  @classmethod
  def tanh_rnn(cls, features: int, **kwargs) -> "SimpleRNNCell":
    """The tanh RNN of size `features`: W orthogonal, V Glorot; kwargs: the class's
    other fields (recurrent_init, kernel_init, ...; not activation)."""
    return cls(features, "tanh", **kwargs)

  def setup(self):
    weights.check_features(self.features)
    algebra.check_real_dtype(self.param_dtype, "param_dtype")
    recurrence.elementwise_activation(self.activation)
    self.w = self.param("w", self.recurrent_init, (self.features, self.features),
                        self.param_dtype)
    self.v = InputProjection(self.features, kernel_init=self.kernel_init,
                             param_dtype=self.param_dtype, name="v")

  def transition(self):
    """W (n, n)."""
    return self.w

  def project_inputs(self, x_BxD, lazy: bool = False):
    """V x + b: real (..., D) -> (..., n); any leading axes (with `lazy`, (L, B, D) -> a
    `recurrence.Projection` for `scan`)."""
    return self.v(x_BxD, lazy=lazy)

  def __call__(self, carry_BxH, x_BxD):
    """One step. carry (..., n), x (..., D) real -> (new carry, output = new carry)."""
    projected = self.project_inputs(x_BxD)  # first: setup's checks of the sizes
    self._check_carry(carry_BxH, projected)
    return self.step(carry_BxH, projected, self.transition())


def _identity_init(key, shape, dtype=jnp.float32):
  del key
  return jnp.eye(shape[0], shape[1], dtype=dtype)
