"""expRNN's orthogonal RNN cell, and parameter counts for comparisons at equal budgets.

`OrthogonalRNNCell` is the recurrent layer of expRNN (Lezcano-Casado & Martínez-Rubio
2019): h_t = modReLU(W h_{t-1} + V x_t), real states, W = expm(A(μ)) ∈ SO(n) from the
so(n) coefficients μ (`lie_unitary.orthogonal_from_lambdas`).

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
from lie_unitary.nn import cells
from lie_unitary.nn import recurrence
from lie_unitary.nn import weights
from lie_unitary.nn.recurrence import real_modrelu

__all__ = ["ORTHOGONAL_INITS", "OrthogonalRNNCell", "block_rotation_init", "gurnn_num_params",
           "orthogonal_labels", "orthogonal_rnn_num_params"]

Initializer = Callable[..., jax.Array]

# The initialisations of A(μ) (`block_rotation_init`), the first the default.
ORTHOGONAL_INITS = ("cayley", "henaff")


def block_rotation_init(kind: str = "cayley") -> Initializer:
  """Initializer of so(n) coefficients μ whose A(μ) is block diagonal, as expRNN's code.

  A(μ) has 2×2 blocks [[0, a_i], [-a_i, 0]] on rows and columns (2i, 2i+1) (for odd n
  the last row and column are zero), so W = expm(A(μ)) rotates plane (2i, 2i+1) by a_i.
  As expRNN's ``initialization.py``: 'cayley' a_i = -tan(u_i / 2), u_i ~ U(0, π/2)
  (``cayley_init_``, after scoRNN); 'henaff' a_i ~ U(-π, π) (``henaff_init_``).

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


class OrthogonalRNNCell(cells._RealState, nn.RNNCellBase):
  """expRNN's orthogonal RNN cell: h_t = modReLU(W h_{t-1} + V x_t, b), W = expm(A(μ)).

  Real states h (..., n), zeros at first; row-vector form h_t = real_modrelu(h_{t-1} @ Wᵀ
  + x_t @ V, b). Parameters (real, param_dtype): ``mu`` (n(n-1)/2,), W =
  `orthogonal_from_lambdas(μ)` ∈ SO(n), init `block_rotation_init(skew_init)` (train it
  at a tenth of the others' rate: `orthogonal_labels`); ``v`` (Dense, no bias, kernel
  (D, n), N(0, 2 / D) untruncated as expRNN's kaiming_normal_); ``modrelu_bias`` (n,)
  ~ U(±0.01). A `ScanningCell` (`real_modrelu_recurrence`).

  expRNN applies B = expm(A) to row vectors (Bᵀ h); this cell's A(μ) is expRNN's
  Aᵀ = -A: an expRNN parameter carries over as μ_k = -A[r, s] for the k-th pair r < s.

  Attributes:
    features: n, the state size, an integer ≥ 2.
    skew_init: 'cayley' (default) or 'henaff' (`block_rotation_init`; expRNN's ``--init``).
    kernel_init: initializer of V (D, n); N(0, 2 / D) by default.
    param_dtype: float32 or float64.
    expm_method: `orthogonal_from_lambdas`'s method: 'auto', 'eigh' or 'pade'.

  Raises (at `init` / `apply`):
    ValueError: features not an integer ≥ 2, a param_dtype other than float32 or
      float64, an unknown skew_init or expm_method, a complex input, or a carry that
      is not real (..., n) with x's batch axes.
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
    algebra.check_real_dtype(self.param_dtype, "param_dtype")
    self.mu = self.param("mu", block_rotation_init(self.skew_init), (n * (n - 1) // 2,),
                         self.param_dtype)
    self.modrelu_bias = self.param("modrelu_bias", cells._uniform(-0.01, 0.01), (n,),
                                   self.param_dtype)
    self.v = cells.InputProjection(n, use_bias=False, kernel_init=self.kernel_init,
                                   param_dtype=self.param_dtype, name="v")

  def orthogonal(self) -> jax.Array:
    """W = expm(A(μ)), real (n, n) of param_dtype, orthogonal with determinant +1."""
    return expm.orthogonal_from_lambdas(self.mu, self.expm_method)

  def transition(self) -> jax.Array:
    """Wᵀ, real (n, n): h @ Wᵀ = W h. One expm, once per forward pass."""
    return self.orthogonal().T

  def project_inputs(self, x_BxD, lazy: bool = False):
    """V x: real (..., D) -> (..., n); any leading axes (with `lazy`, (L, B, D) -> a
    `recurrence.Projection` for `scan`)."""
    return self.v(x_BxD, lazy=lazy)

  def step(self, carry_BxH, projected_BxH, transition):
    """h = modReLU(h_prev @ transition + projected, b): (..., n) -> (new carry, output)."""
    h = real_modrelu(carry_BxH @ transition + projected_BxH, self.modrelu_bias)
    return h, h

  def scan(self, carry_BxH, projected_LxBxH, transition, unroll: int = 1,
           outputs: bool = True):
    """All L steps, time-major: (B, n) carry, (L, B, n) projections -> (carry, (L, B, n),
    or None when `outputs` is False)."""
    hs = recurrence.real_modrelu_recurrence(transition, carry_BxH, projected_LxBxH,
                                            self.modrelu_bias, unroll, last_only=not outputs)
    return (hs[-1], hs) if outputs else (hs, None)

  def __call__(self, carry_BxH, x_BxD):
    """One step (one expm). carry (..., n), x (..., D) real -> (new carry, output)."""
    projected = self.project_inputs(x_BxD)  # first: setup's checks of the sizes
    self._check_carry(carry_BxH, projected)
    return self.step(carry_BxH, projected, self.transition())


def orthogonal_labels(params) -> Any:
  """Labels for `optax.multi_transform`: 'orthogonal' for every μ, 'rest' for the others.

  A leaf is μ when its last key is ``"mu"`` (also `OrthogonalLinear`'s). As expRNN:
  ``optax.multi_transform({"orthogonal": optax.rmsprop(lr / 10), "rest":
  optax.rmsprop(lr)}, orthogonal_labels)``.

  Args:
    params: a pytree of parameters (flax's ``{"params": ...}`` or its inner tree).

  Returns:
    A pytree of the same structure with the string 'orthogonal' or 'rest' at each leaf.
  """
  def label(path, _):
    last = path[-1] if path else None
    return "orthogonal" if getattr(last, "key", None) == "mu" else "rest"

  return jax.tree_util.tree_map_with_path(label, params)


def orthogonal_rnn_num_params(hidden_size: int, input_size: int, output_size: int) -> int:
  """Trainable reals of `SequenceModel(OrthogonalRNNCell(n), K)` on D inputs:
  n(n-1)/2 (μ) + n·D (V) + n (modReLU bias) + n·K + K (the readout).

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

  Constrained cell (rebased or not): n² (λ) + 2n·D + 2n (V and its bias) + n for
  'modrelu' (its bias) + 2n·K + K (the readout).

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
  if activation not in cells.GURNN_ACTIVATIONS:
    raise ValueError(f"unknown activation {activation!r}; choose from "
                     f"{cells.GURNN_ACTIVATIONS}.")
  return n * n + 2 * n * d + 2 * n + (n if activation == "modrelu" else 0) + 2 * n * k + k
