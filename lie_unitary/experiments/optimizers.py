"""The optimizers and training state the experiment families share (optax underneath).

`make_optimizer`: SGD (the paper's operator learning) or RMSProp without momentum (its
RNNs), optionally after clipping by value; `schedule`: a learning rate over a run by name.
"""

from __future__ import annotations

from typing import Any
from typing import Callable
from typing import NamedTuple
from typing import Union

import optax

__all__ = ["OPTIMIZERS", "SCHEDULES", "LearningRate", "TrainState", "make_optimizer",
           "schedule"]

OPTIMIZERS = ("sgd", "rmsprop")
# Learning-rate schedules over a whole run (`schedule`).
SCHEDULES = ("constant", "cosine")

LearningRate = Union[float, Callable[[Any], Any]]  # a constant or an optax schedule


class TrainState(NamedTuple):
  """Parameters and optimizer state of one replicate (stacked over replicates in a sweep)."""
  params: Any
  opt_state: Any


def schedule(name: str, learning_rate: float, total_steps: int | None = None) -> LearningRate:
  """A learning rate over a run: 'constant', or 'cosine' (from `learning_rate` to 0 over
  `total_steps`, optax.cosine_decay_schedule).

  Raises:
    ValueError: an unknown name, or 'cosine' without total_steps ≥ 1.
  """
  if name == "constant":
    return learning_rate
  if name == "cosine":
    if not total_steps or total_steps < 1:
      raise ValueError("the 'cosine' schedule needs total_steps ≥ 1.")
    return optax.cosine_decay_schedule(learning_rate, total_steps)
  raise ValueError(f"unknown learning-rate schedule {name!r}; expected one of {SCHEDULES}.")


def make_optimizer(name: str, learning_rate: LearningRate, *, rmsprop_decay: float = 0.9,
                   rmsprop_eps: float = 1e-8, rmsprop_initial_scale: float = 0.0,
                   rmsprop_eps_in_sqrt: bool = True,
                   clip_value: float = 0.0,
                   clip_norm: float = 0.0) -> optax.GradientTransformation:
  """'sgd' or 'rmsprop' (no momentum), optionally after clipping gradients by global norm
  and by value.

  Args:
    name: 'sgd' or 'rmsprop'.
    learning_rate: a float or an optax schedule.
    rmsprop_decay: decay of RMSProp's mean square.
    rmsprop_eps: RMSProp's epsilon.
    rmsprop_initial_scale: RMSProp's initial mean square (1.0 as TensorFlow's
      RMSPropOptimizer, 0 as optax).
    rmsprop_eps_in_sqrt: add epsilon under the square root (TensorFlow's and optax's
      default, a floor of √eps on the denominator) or, False, outside it (PyTorch's
      `RMSprop`, a floor of eps).
    clip_value: > 0: clip every gradient entry to [-clip_value, clip_value] first;
      0: no clipping.
    clip_norm: > 0: scale the whole gradient (every leaf the transformation sees) down to
      global L2 norm ≤ clip_norm before anything else; 0: no scaling.

  Returns:
    The optax transformation.

  Raises:
    ValueError: for an unknown name or a negative clip_value or clip_norm.
  """
  if name == "sgd":
    optimizer = optax.sgd(learning_rate)
  elif name == "rmsprop":
    optimizer = optax.rmsprop(learning_rate, decay=rmsprop_decay, eps=rmsprop_eps,
                              initial_scale=rmsprop_initial_scale,
                              eps_in_sqrt=rmsprop_eps_in_sqrt)
  else:
    raise ValueError(f"unknown optimizer {name!r}; expected one of {OPTIMIZERS}.")
  if not clip_value >= 0:
    raise ValueError(f"clip_value must be ≥ 0; got {clip_value}.")
  if not clip_norm >= 0:
    raise ValueError(f"clip_norm must be ≥ 0; got {clip_norm}.")
  if clip_value > 0:
    optimizer = optax.chain(optax.clip(clip_value), optimizer)
  if clip_norm > 0:
    optimizer = optax.chain(optax.clip_by_global_norm(clip_norm), optimizer)
  return optimizer
