"""A recurrent cell scanned over sequences with a linear readout, and its fast path.

`SequenceModel` runs any `nn.RNNCellBase` over a (B, L, D) batch; a `FastPathCell` (all
of `lie_unitary.nn`'s cells) gets its per-pass constants (the guRNN's U(λ): one eigh)
and input projections computed ONCE per call, outside the loop over time.

Letters in names: B batch, L steps, D input features, H state size, K outputs.
"""

from __future__ import annotations

import math
from typing import Any
from typing import Callable
from typing import Protocol
from typing import runtime_checkable

import flax.linen as nn
import jax
import jax.numpy as jnp

from lie_unitary import algebra

__all__ = ["FastPathCell", "ScanningCell", "SequenceModel", "torch_linear_init"]

Initializer = Callable[..., jax.Array]


def torch_linear_init(fan_in: int) -> tuple[Initializer, Initializer]:
  """PyTorch's `nn.Linear` initialisation, for `SequenceModel`'s readout: kernel and bias
  both ~ U(±1/√fan_in) (``kaiming_uniform_`` with a = √5, and its bias rule).

  Args:
    fan_in: the readout's input size H (the cell's state size).

  Returns:
    (kernel_init, bias_init), each `(key, shape, dtype=float32) -> array`.

  Raises:
    ValueError: fan_in is not an integer ≥ 1.
  """
  fan_in = algebra.check_positive_int(fan_in, "fan_in")
  bound = 1.0 / math.sqrt(fan_in)

  def init(key, shape, dtype=jnp.float32):
    return jax.random.uniform(key, shape, dtype, -bound, bound)

  return init, init


@runtime_checkable
class FastPathCell(Protocol):
  """A recurrent cell whose step splits into per-pass constants, inputs and recurrence.

  A structural type (`isinstance` checks the methods are present). `cell(carry, x_t)`
  must equal `cell.step(carry, cell.project_inputs(x_t), cell.transition())`:
  `SequenceModel` calls `transition` and `project_inputs` once per forward pass and
  loops only over `step`.
  """

  def transition(self) -> Any:
    """Per-forward-pass constants, any pytree (the guRNN: β·U(λ) as a real (H, H) block
    matrix; the IRNN / tanh RNN: W (H, H); the ruRNN: None)."""

  def project_inputs(self, x_BxD: jax.Array) -> jax.Array:
    """The inputs' contributions to the pre-activations, e.g. V x + b: real (..., D) ->
    (..., H), any leading axes (SequenceModel passes (L, B, D))."""

  def step(self, carry_BxH: jax.Array, projected_BxH: jax.Array,
           transition: Any) -> tuple[jax.Array, jax.Array]:
    """One step from the state (B, H) and this step's projected input (B, H) ->
    (new carry (B, H), output (B, H))."""


@runtime_checkable
class ScanningCell(FastPathCell, Protocol):
  """A `FastPathCell` that also runs all steps in its own loop (a kernel of
  `lie_unitary.nn.recurrence`); `SequenceModel` uses it when the carry is (B, H). It must
  give the same numbers as scanning `step`. Its `project_inputs(x, lazy=True)` returns a
  `recurrence.Projection` of (L, B, D) inputs, which its `scan` takes in place of the
  (L, B, H) array and forms a step at a time."""

  def scan(self, carry_BxH: jax.Array, projected_LxBxH: jax.Array, transition: Any,
           unroll: int = 1, outputs: bool = True) -> tuple[jax.Array, jax.Array | None]:
    """All L steps, time-major: initial state (B, H), projected inputs (L, B, H) ->
    (final carry (B, H), outputs (L, B, H)); `unroll` steps per loop iteration. With
    `outputs` False the outputs are None and need not be kept (a readout of the last
    step: the final carry is the last output)."""


def _cell_body(cell, carry, x_BxD):
  return cell(carry, x_BxD)


def _step_body(cell, carry, projected_BxH, transition):
  return cell.step(carry, projected_BxH, transition)


def _last_output(body):
  """`body` with its output carried instead of stacked: (carry, y_prev) -> ((carry, y), None).
  A readout of the last step then keeps no (L, B, H) outputs, and its reverse pass no
  (L, B, H) cotangent of zeros."""
  def carried(cell, carry_and_y, *xs):
    return body(cell, carry_and_y[0], *xs), None
  return carried


class SequenceModel(nn.Module):
  """A cell scanned over a sequence, then a linear readout (with bias) of its outputs.

  A `ScanningCell` runs its own `scan`, any other `FastPathCell` (the ruRNN) `nn.scan`
  over `step`, and any other `nn.RNNCellBase` (flax's LSTM cells) is `nn.scan`-ed as is.
  `readout='last'` maps the last step's output to (B, K); 'all' every step's to (B, L, K).

  Attributes:
    cell: an `nn.RNNCellBase` (any of `lie_unitary.nn`'s cells, or flax's LSTM cells).
    num_outputs: K.
    readout: 'last' or 'all'.
    unroll: time steps per iteration of the compiled loop (`nn.scan`'s unroll).
    readout_kernel_init, readout_bias_init: initializers of the readout's (H, K) kernel
      and (K,) bias; flax `Dense`'s defaults (LeCun normal, zeros). `torch_linear_init`
      gives PyTorch's `nn.Linear` default.
  """
  cell: nn.RNNCellBase
  num_outputs: int
  readout: str = "last"
  unroll: int = 1
  readout_kernel_init: Initializer = nn.initializers.lecun_normal()
  readout_bias_init: Initializer = nn.initializers.zeros

  @nn.compact
  def __call__(self, x_BxLxD, carry_key=None):
    """Runs the model.

    Args:
      x_BxLxD: real inputs (B, L, D), of the cell's param dtype (float32 or float64).
      carry_key: PRNG key of the initial state (used by cells with a random h0):
        pass a fresh one per training step and a fixed one for evaluation. Required
        when the cell draws a random initial state.

    Returns:
      Real (B, K) for readout 'last', (B, L, K) for 'all'.

    Raises:
      ValueError: on a bad readout, num_outputs not a positive integer, an input that is
        not real (B, L, D) with L, D ≥ 1, or a random h0 without a key.
    """
    if self.readout not in ("last", "all"):
      raise ValueError(f"readout must be 'last' or 'all'; got {self.readout!r}.")
    algebra.check_positive_int(self.num_outputs, "num_outputs")
    x_BxLxD = jnp.asarray(x_BxLxD)
    if x_BxLxD.ndim != 3 or x_BxLxD.shape[1] < 1 or x_BxLxD.shape[2] < 1:
      raise ValueError(f"inputs must be (B, L, D) with L, D ≥ 1; got {x_BxLxD.shape=}.")
    if jnp.iscomplexobj(x_BxLxD):
      raise ValueError(f"inputs must be real; got dtype {x_BxLxD.dtype}.")
    if carry_key is None:
      if getattr(self.cell, "h0", "zeros") == "random":
        raise ValueError("this cell draws a random initial state: pass carry_key.")
      carry_key = jax.random.key(0)  # unused by zero-state cells
    carry = self.cell.initialize_carry(carry_key, x_BxLxD[:, 0].shape)
    last = self.readout == "last"
    if isinstance(self.cell, FastPathCell):
      transition = self.cell.transition()
      # Time-major before projecting: transposing (B, L, D) is cheaper than (B, L, H).
      x_LxBxD = jnp.swapaxes(x_BxLxD, 0, 1)
      if isinstance(self.cell, ScanningCell) and carry.ndim == 2:  # the cell's own loop
        # The projection formed a step at a time inside it: no (L, B, H) inputs stored.
        carry, y_LxBxH = self.cell.scan(carry, self.cell.project_inputs(x_LxBxD, lazy=True),
                                        transition, self.unroll, outputs=not last)
        return self._readout(carry if last else y_LxBxH)
      projected_LxBxH = self.cell.project_inputs(x_LxBxD)
      body, xs, in_axes = _step_body, (projected_LxBxH, transition), (0, nn.broadcast)
    else:  # any other nn.RNNCellBase (flax's LSTM cells)
      body, xs, in_axes = _cell_body, (jnp.swapaxes(x_BxLxD, 0, 1),), 0
    if last:  # the first step outside the loop: its output starts the carried one
      first = jax.tree.map(lambda a: a[0], xs[0])
      carry = body(self.cell, carry, first, *xs[1:])
      body, xs = _last_output(body), (jax.tree.map(lambda a: a[1:], xs[0]),) + xs[1:]
    scan = nn.scan(body, variable_broadcast="params", split_rngs={"params": False},
                   in_axes=in_axes, out_axes=0, unroll=self.unroll)
    carry, y_LxBxH = scan(self.cell, carry, *xs)
    return self._readout(carry[1] if last else y_LxBxH)

  def _readout(self, y):
    """(B, H) the last output ('last') or (L, B, H) all of them ('all') -> the readout."""
    dense = nn.Dense(self.num_outputs, kernel_init=self.readout_kernel_init,
                     bias_init=self.readout_bias_init, name="readout")
    if self.readout == "last":
      return dense(y)
    return jnp.swapaxes(dense(y), 0, 1)
