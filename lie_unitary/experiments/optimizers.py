"""The optax optimizers and training state the experiment families share."""

from typing import Any
from typing import NamedTuple

import optax

OPTIMIZERS = ("sgd", "rmsprop")
SCHEDULES = ("constant", "cosine")  # learning rates over a whole run


class TrainState(NamedTuple):
  """Parameters and optimizer state (stacked over replicates in a sweep)."""
  params: Any
  opt_state: Any


def schedule(name: str, learning_rate: float, total_steps: int | None = None):
  """`learning_rate` constant, or 'cosine' decaying to 0 over `total_steps` ≥ 1."""
  if name not in SCHEDULES or (name == "cosine" and not (total_steps or 0) >= 1):
    raise ValueError(f"learning-rate schedule {name!r} (total_steps = {total_steps}): "
                     f"expected one of {SCHEDULES}, 'cosine' with total_steps ≥ 1.")
  if name == "constant":
    return learning_rate
  return optax.cosine_decay_schedule(learning_rate, total_steps)


def make_optimizer(name: str, learning_rate, *, clip_value: float = 0.0,
                   clip_norm: float = 0.0, **rmsprop) -> optax.GradientTransformation:
  """`optax.sgd` or `optax.rmsprop` (``rmsprop_decay=`` …) after `optax.clip_by_global_norm`
  then `optax.clip` where > 0 (ValueError: an unknown name, a negative clip)."""
  if name not in OPTIMIZERS or not clip_value >= 0 or not clip_norm >= 0:
    raise ValueError(f"unknown optimizer {name!r} or a negative clip ({clip_value=}, "
                     f"{clip_norm=}); expected one of {OPTIMIZERS}, clips ≥ 0.")
  rmsprop = {k.removeprefix("rmsprop_"): v for k, v in rmsprop.items()}
  optimizer = optax.rmsprop(learning_rate, **rmsprop) if name == "rmsprop" else optax.sgd(
      learning_rate)
  if clip_value > 0:
    optimizer = optax.chain(optax.clip(clip_value), optimizer)
  if clip_norm > 0:
    optimizer = optax.chain(optax.clip_by_global_norm(clip_norm), optimizer)
  return optimizer
