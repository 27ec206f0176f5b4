"""An orthogonal RNN cell in the expRNN architecture, and parameter counts for budgets.

`OrthogonalRNNCell` is the recurrent layer of expRNN (Lezcano-Casado & Martínez-Rubio
2019): h_t = modReLU(W h_{t-1} + V x_t), real states, W = expm(A(μ)) ∈ SO(n) with the
so(n) coefficients μ (n(n-1)/2 reals) as the trained parameter, through
`lie_unitary.orthogonal_from_lambdas`. expRNN trains μ at a tenth of the other
parameters' learning rate: `orthogonal_labels` gives the labels for
`optax.multi_transform`.

`orthogonal_rnn_num_params` and `gurnn_num_params` count the trainable reals of a
`SequenceModel` built on this cell or on `GURNNCell`, for comparisons at equal budgets.

Letters in names: B batch, L steps, D input features, H state size (n), K outputs.
"""

from __future__ import annotations

import math
from typing import Any
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from lie_unitary import algebra
from lie_unitary import expm
from lie_unitary.nn import recurrence
from lie_unitary.nn import weights
from lie_unitary.nn.recurrence import real_modrelu

__all__ = [
    "ORTHOGONAL_INITS",
    "OrthogonalRNNCell",
    "block_rotation_init",
    "gurnn_num_params",
    "orthogonal_labels",
    "orthogonal_rnn_num_params",
    "real_modrelu",  # re-exported from `recurrence`, where its kernel lives
]

Initializer = Callable[..., jax.Array]

# The initialisations of A(μ) (`block_rotation_init`), the first the default.
ORTHOGONAL_INITS = ("cayley", "henaff")

# The cell's name for μ, and the labels of `orthogonal_labels`.
_MU = "mu"
_ORTHOGONAL, _REST = "orthogonal", "rest"


def block_rotation_init(kind: str = "cayley") -> Initializer:
  """Initializer of so(n) coefficients μ whose A(μ) is block diagonal, as expRNN's code.

  A(μ) has 2×2 blocks [[0, a_i], [-a_i, 0]] on rows and columns (2i, 2i+1),
  i = 0..⌊n/2⌋-1, and zeros elsewhere (for odd n the last row and column are zero), so
  W = expm(A(μ)) rotates each plane (2i, 2i+1) by the angle a_i: W's eigenvalues are
  e^{±i a_i} (and 1 for odd n). The a_i are drawn as in expRNN's ``initialization.py``
  (Lezcano-Casado & Martínez-Rubio 2019):

  - 'cayley' (``cayley_init_``, after scoRNN, Helfrich, Willmott & Ye 2018):
    a_i = -sqrt((1 - cos u_i) / (1 + cos u_i)) = -tan(u_i / 2), u_i ~ U(0, π/2), so
    a_i ∈ (-1, 0]. (Through a Cayley transform, as in scoRNN, such a block rotates its
    plane by ∓u_i; through expm, as in expRNN, by a_i itself, so |a_i| < 1.)
  - 'henaff' (``henaff_init_``, after Henaff, Szlam & LeCun 2016): a_i ~ U(-π, π).

  μ is read off A with `lie_unitary.algebra.skew_symmetric_to_lambdas` (μ_k = A[r, s]
  for the k-th pair r < s, row-major over the strict upper triangle).

  Args:
    kind: 'cayley' or 'henaff'.

  Returns:
    An initializer `(key, shape, dtype=float32) -> μ` for shape (n(n-1)/2,), n ≥ 2.

  Raises:
    ValueError: an unknown `kind` (at once); a shape that is not (n(n-1)/2,) for an
      integer n ≥ 2 (when the initializer is called).
  """
  if kind not in ORTHOGONAL_INITS:
    raise ValueError(f"unknown init {kind!r}; choose from {ORTHOGONAL_INITS}.")

  def initializer(key, shape, dtype=jnp.float32):
    if len(shape) != 1:
      raise ValueError(f"μ must have shape (n(n-1)/2,); got {shape}.")
    n = algebra.n_from_num_so_lambdas(shape[0])
    m = n // 2
    if kind == "cayley":
      a = -jnp.tan(jax.random.uniform(key, (m,), dtype, 0.0, math.pi / 2) / 2)
    else:
      a = jax.random.uniform(key, (m,), dtype, -math.pi, math.pi)
    even = 2 * jnp.arange(m)
    skew = jnp.zeros((n, n), dtype).at[even, even + 1].set(a).at[even + 1, even].set(-a)
    return algebra.skew_symmetric_to_lambdas(skew)

  return initializer


def _uniform(minval: float, maxval: float) -> Initializer:
  return lambda key, shape, dtype=jnp.float32: jax.random.uniform(key, shape, dtype, minval,
                                                                  maxval)


class OrthogonalRNNCell(nn.RNNCellBase):
  """expRNN's orthogonal RNN cell: h_t = modReLU(W h_{t-1} + V x_t, b), W = expm(A(μ)).

  Real states h (..., n), in the row-vector form of the other cells:
  h_t = modReLU(h_{t-1} @ Wᵀ + x_t @ V, b), modReLU = `real_modrelu`.
  Parameters (all real, of param_dtype):

  - ``mu`` (n(n-1)/2,): the so(n) coefficients μ, W = `orthogonal_from_lambdas(μ)` ∈
    SO(n); initialised by `block_rotation_init(skew_init)`. Train it at a tenth of the
    others' learning rate as expRNN (`orthogonal_labels`).
  - ``v`` (a Dense layer without bias), ``kernel`` (D, n): V, initialised as expRNN's
    ``kaiming_normal_(nonlinearity="relu")``, N(0, 2 / D) (untruncated; flax's
    `he_normal` truncates).
  - ``modrelu_bias`` (n,): b ~ U(-0.01, 0.01).

  The initial state is zeros. A `lie_unitary.nn.ScanningCell`: `SequenceModel` forms
  W once per forward pass (`transition`) and V x for all steps at once
  (`project_inputs`), then runs `scan`, `real_modrelu_recurrence`: one (B, n) @ (n, n)
  matmul and modReLU a step, and a hand-written reverse pass that forms W̄ in one
  matmul after its loop (`step` gives the same numbers, one step at a time).

  expRNN's code applies B = expm(A) to row vectors (h @ B, i.e. Bᵀ h); this cell
  applies W = expm(A(μ)) as W h, so its A(μ) is expRNN's Aᵀ = -A. To carry a trained
  expRNN parameter over (its code uses only A's strict upper triangle), take
  μ_k = -A[r, s] for the k-th pair r < s. At init the difference is a_i ↦ -a_i in every
  block, the same as negating unit 2i+1 (V's column and the readout's row, drawn
  symmetrically): the same distribution of models.

  Attributes:
    features: n, the state size, an integer ≥ 2.
    skew_init: 'cayley' (default) or 'henaff': the draw of A(μ) (`block_rotation_init`;
      expRNN's ``--init``). Not ``init``, which would hide flax's `Module.init`.
    kernel_init: initializer of V (D, n); N(0, 2 / D) by default.
    param_dtype: float32 or float64.
    expm_method: `orthogonal_from_lambdas`'s method: 'auto', 'eigh' or 'pade'.

  Raises (at `init` / `apply`):
    ValueError: features not an integer ≥ 2, an unknown skew_init or expm_method.
  """
  features: int
  skew_init: str = "cayley"
  kernel_init: Initializer = nn.initializers.variance_scaling(2.0, "fan_in", "normal")
  param_dtype: Any = jnp.float32
  expm_method: str = "auto"

  def setup(self):
    n = weights.check_features(self.features)
    if n < 2:
      raise ValueError(f"features must be ≥ 2 (SO(1) has no parameters); got {n}.")
    self.mu = self.param(_MU, block_rotation_init(self.skew_init), (n * (n - 1) // 2,),
                         self.param_dtype)
    self.modrelu_bias = self.param("modrelu_bias", _uniform(-0.01, 0.01), (n,),
                                   self.param_dtype)
    self.v = nn.Dense(n, use_bias=False, kernel_init=self.kernel_init,
                      param_dtype=self.param_dtype, name="v")

  def orthogonal(self) -> jax.Array:
    """W = expm(A(μ)), real (n, n) of param_dtype, orthogonal with determinant +1."""
    return expm.orthogonal_from_lambdas(self.mu, self.expm_method)

  def transition(self) -> jax.Array:
    """Wᵀ, real (n, n): h @ Wᵀ = W h. One expm, once per forward pass."""
    return self.orthogonal().T

  def project_inputs(self, x_BxD):
    """V x: real (..., D) -> (..., n); any leading axes."""
    return self.v(x_BxD)

  def step(self, carry_BxH, projected_BxH, transition):
    """h = modReLU(h_prev @ transition + projected, b): (..., n) -> (new carry, output)."""
    h = real_modrelu(carry_BxH @ transition + projected_BxH, self.modrelu_bias)
    return h, h

  def scan(self, carry_BxH, projected_LxBxH, transition, unroll: int = 1):
    """All L steps, time-major: (B, n) carry, (L, B, n) projections -> (carry, (L, B, n)),
    through `real_modrelu_recurrence` (a hand-written reverse pass)."""
    hs = recurrence.real_modrelu_recurrence(transition, carry_BxH, projected_LxBxH,
                                            self.modrelu_bias, unroll)
    return hs[-1], hs

  def __call__(self, carry_BxH, x_BxD):
    """One step. carry (..., n), x (..., D) real -> (new carry, output = new carry).

    Forms W (one expm) at every call: `SequenceModel` instead calls `transition` and
    `project_inputs` once per sequence batch and scans `step`.
    """
    return self.step(carry_BxH, self.project_inputs(x_BxD), self.transition())

  @nn.nowrap
  def initialize_carry(self, rng, input_shape):
    """Zeros (..., n) of param_dtype for inputs of shape (..., D); `rng` is unused."""
    del rng
    return jnp.zeros(tuple(input_shape[:-1]) + (self.features,), self.param_dtype)

  @property
  def num_feature_axes(self) -> int:
    """1: the state has one feature axis (the last)."""
    return 1


def orthogonal_labels(params) -> Any:
  """Labels for `optax.multi_transform`: 'orthogonal' for every μ, 'rest' for the others.

  A leaf is μ when its last key is ``"mu"``: `OrthogonalRNNCell`'s μ (and any other
  module's parameter of that name, e.g. `OrthogonalLinear`'s, also so(n) coefficients).
  expRNN trains these with RMSProp at a tenth of the others' learning rate:
  ``optax.multi_transform({"orthogonal": optax.rmsprop(lr / 10), "rest":
  optax.rmsprop(lr)}, orthogonal_labels)``.

  Args:
    params: a pytree of parameters (flax's ``{"params": ...}`` or its inner tree).

  Returns:
    A pytree of the same structure with the string 'orthogonal' or 'rest' at each leaf.
  """
  def label(path, _):
    last = path[-1] if path else None
    return _ORTHOGONAL if getattr(last, "key", None) == _MU else _REST

  return jax.tree_util.tree_map_with_path(label, params)


def orthogonal_rnn_num_params(hidden_size: int, input_size: int, output_size: int) -> int:
  """Trainable reals of `SequenceModel(OrthogonalRNNCell(n), K)` on D inputs.

  n(n-1)/2 (μ: the dimension of SO(n), stored as exactly that many coefficients)
  + n·D (V) + n (modReLU bias) + n·K + K (the readout and its bias).

  Args:
    hidden_size: n, the cell's ``features`` (≥ 2).
    input_size: D (≥ 1).
    output_size: K (≥ 1).

  Returns:
    The count, an int.

  Raises:
    ValueError: a size that is not an integer ≥ 1, or hidden_size < 2.
  """
  n = weights.check_features(hidden_size, "hidden_size")
  d = weights.check_features(input_size, "input_size")
  k = weights.check_features(output_size, "output_size")
  if n < 2:
    raise ValueError(f"hidden_size must be ≥ 2; got {n}.")
  return n * (n - 1) // 2 + n * d + n + n * k + k


def gurnn_num_params(features: int, input_size: int, output_size: int,
                     activation: str = "relu") -> int:
  """Trainable reals of `SequenceModel(GURNNCell(n, activation=...), K)` on D inputs.

  For the constrained cell (no ``unconstrained``, any ``rebased``: its base is not a
  parameter): n² (λ: the dimension of U(n)) + 2n·D + 2n (V = [V_re | V_im] as a real
  (D, 2n) Dense kernel and its bias) + n for 'modrelu' (its bias per complex unit)
  + 2n·K + K (the readout of the 2n-real state, and its bias).

  Args:
    features: n, the cell's ``features`` (complex units; the state has 2n reals), ≥ 1.
    input_size: D (≥ 1).
    output_size: K (≥ 1).
    activation: the cell's activation: 'relu', 'tanh', 'identity' or 'modrelu'.

  Returns:
    The count, an int.

  Raises:
    ValueError: a size that is not an integer ≥ 1, or an unknown activation.
  """
  n = weights.check_features(features, "features")
  d = weights.check_features(input_size, "input_size")
  k = weights.check_features(output_size, "output_size")
  if activation != "modrelu":
    recurrence.elementwise_activation(activation)  # raises on an unknown name
  return n * n + 2 * n * d + 2 * n + (n if activation == "modrelu" else 0) + 2 * n * k + k
