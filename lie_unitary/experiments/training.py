"""What both experiment families train with: one TrainState, one optimizer factory."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Sequence

import jax.numpy as jnp
import optax

__all__ = ["TrainState", "make_optimizer", "step_schedule"]


class TrainState(NamedTuple):
  """Parameters and optimizer state (stacked over replicates while training)."""
  params: Any
  opt_state: Any


def step_schedule(learning_rate: float, drops: Sequence[int], factor: float) -> Callable:
  """An optax schedule: learning_rate · factor^#{d in drops : count ≥ d}.

  The update with 0-based index u ≥ d is scaled (optax evaluates a schedule at the
  number of updates made before the current one).
  """
  drops = tuple(int(d) for d in drops)
  if not drops:
    return lambda count: jnp.asarray(learning_rate, jnp.float32)
  boundaries = jnp.asarray(drops)
  return lambda count: learning_rate * factor ** jnp.sum(count >= boundaries)


def make_optimizer(name: str, learning_rate, *, rmsprop_decay: float = 0.9,
                   rmsprop_eps: float = 1e-8, rmsprop_initial_scale: float = 0.0,
                   clip_value: float = 0.0) -> optax.GradientTransformation:
  """'sgd' or 'rmsprop' (no momentum), optionally clipped by value first.

  Args:
    name: 'sgd' or 'rmsprop'.
    learning_rate: a float or an optax schedule.
    rmsprop_decay, rmsprop_eps, rmsprop_initial_scale: RMSProp's decay of the mean
      square, epsilon, and initial mean square (TensorFlow's RMSProp starts at 1).
    clip_value: clip every gradient entry to [-clip_value, clip_value] first; 0: off.

  Raises:
    ValueError: for an unknown optimizer name or a negative clip value.
  """
  if name == "sgd":
    opt = optax.sgd(learning_rate)
  elif name == "rmsprop":
    opt = optax.rmsprop(learning_rate, decay=rmsprop_decay, eps=rmsprop_eps,
                        initial_scale=rmsprop_initial_scale)
  else:
    raise ValueError(f"unknown optimizer {name!r}; expected 'sgd' or 'rmsprop'.")
  if clip_value < 0:
    raise ValueError(f"clip_value must be ≥ 0; got {clip_value}.")
  return optax.chain(optax.clip(clip_value), opt) if clip_value > 0 else opt
