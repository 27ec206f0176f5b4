"""The optax optimizers and training state the experiment families share."""

from __future__ import annotations

from typing import Any
from typing import NamedTuple

import optax

__all__ = ["OPTIMIZERS", "SCHEDULES", "TrainState", "make_optimizer", "schedule"]

OPTIMIZERS = ("sgd", "rmsprop")
SCHEDULES = ("constant", "cosine")  # learning rates over a whole run


class TrainState(NamedTuple):
  """Parameters and optimizer state of one replicate (stacked over replicates in a sweep)."""
  params: Any
  opt_state: Any


def schedule(name: str, learning_rate: float, total_steps: int | None = None):
  """`learning_rate` constant, or 'cosine' decaying to 0 over `total_steps` (ValueError:
  an unknown name, or 'cosine' without total_steps ≥ 1)."""
  if name == "constant":
    return learning_rate
  if name != "cosine":
    raise ValueError(f"unknown learning-rate schedule {name!r}; expected one of {SCHEDULES}.")
  if not total_steps or total_steps < 1:
    raise ValueError("the 'cosine' schedule needs total_steps ≥ 1.")
  return optax.cosine_decay_schedule(learning_rate, total_steps)


def make_optimizer(name: str, learning_rate, *, rmsprop_decay: float = 0.9,
                   rmsprop_eps: float = 1e-8, rmsprop_initial_scale: float = 0.0,
                   rmsprop_eps_in_sqrt: bool = True, clip_value: float = 0.0,
                   clip_norm: float = 0.0) -> optax.GradientTransformation:
  """`optax.sgd` or `optax.rmsprop` (no momentum; the rmsprop_* arguments are its own) at
  `learning_rate` (a float or an optax schedule), after `optax.clip_by_global_norm` to
  `clip_norm` and `optax.clip` to ±`clip_value` where these are > 0.

  Raises:
    ValueError: an unknown name, or a negative clip_value or clip_norm.
  """
  if name not in OPTIMIZERS:
    raise ValueError(f"unknown optimizer {name!r}; expected one of {OPTIMIZERS}.")
  for arg, value in (("clip_value", clip_value), ("clip_norm", clip_norm)):
    if not value >= 0:
      raise ValueError(f"{arg} must be ≥ 0; got {value}.")
  optimizer = optax.sgd(learning_rate) if name == "sgd" else optax.rmsprop(
      learning_rate, decay=rmsprop_decay, eps=rmsprop_eps,
      initial_scale=rmsprop_initial_scale, eps_in_sqrt=rmsprop_eps_in_sqrt)
  if clip_value > 0:
    optimizer = optax.chain(optax.clip(clip_value), optimizer)
  if clip_norm > 0:
    optimizer = optax.chain(optax.clip_by_global_norm(clip_norm), optimizer)
  return optimizer
