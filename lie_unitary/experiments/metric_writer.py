"""Optional TensorBoard event files beside the JSONL records; off by default.

The JSONL records (`lie_unitary.experiments.records`) are the results; this only adds
live curves for TensorBoard when asked for:

    writer = make_writer(logdir)          # logdir None: a writer that does nothing
    writer.scalars(step, {"val_loss": 0.3, "train_loss": 0.4})
    writer.close()

A logdir needs tensorboardX (``pip install lie_unitary[tensorboard]``), imported only
then.
"""

from __future__ import annotations

import os
from typing import Mapping

__all__ = ["MetricWriter", "make_writer", "require_tensorboard"]

_TENSORBOARD_HINT = "pip install lie_unitary[tensorboard]"


class MetricWriter:
  """Writes scalar metrics by step. This base class is the no-op writer.

  Usable as a context manager (closes on exit).
  """

  def scalars(self, step: int, values: Mapping[str, float]) -> None:
    """Records `values` (metric name → number) at training step `step`.

    Args:
      step: the training step the values belong to.
      values: scalar metrics; anything `float()` accepts (numpy / jax scalars, the
        strings 'nan' / 'inf' of the JSONL records).
    """
    del step, values

  def close(self) -> None:
    """Flushes and closes the writer; further `scalars` calls are not allowed."""

  def __enter__(self) -> "MetricWriter":
    return self

  def __exit__(self, *exc) -> None:
    self.close()


class _TensorBoardWriter(MetricWriter):
  """A tensorboardX SummaryWriter: one scalar series per metric name."""

  def __init__(self, logdir: str):
    try:
      from tensorboardX import SummaryWriter
    except ImportError as e:
      raise ImportError(f"TensorBoard metrics need tensorboardX: {_TENSORBOARD_HINT}") from e
    self.logdir = logdir
    self._writer = SummaryWriter(logdir=logdir)

  def scalars(self, step: int, values: Mapping[str, float]) -> None:
    for name, value in values.items():
      self._writer.add_scalar(str(name), float(value), global_step=int(step))
    self._writer.flush()

  def close(self) -> None:
    self._writer.close()


def require_tensorboard() -> None:
  """Raises ConfigError (before a run writes anything) when tensorboardX is missing."""
  try:
    import tensorboardX  # noqa: F401
  except ImportError as e:
    from lie_unitary.experiments.fields import ConfigError
    raise ConfigError(f"--tensorboard needs tensorboardX: {_TENSORBOARD_HINT}") from e


def make_writer(logdir: str | os.PathLike | None) -> MetricWriter:
  """A metric writer for `logdir`.

  Args:
    logdir: None: a writer that discards everything (the default setting); a folder
      path: TensorBoard event files written there by a tensorboardX ``SummaryWriter``
      (the folder is created).

  Returns:
    A `MetricWriter` with ``.scalars(step, values)`` and ``.close()``.

  Raises:
    ImportError: `logdir` is given and tensorboardX is not installed (the message
      names ``pip install lie_unitary[tensorboard]``).
  """
  if logdir is None:
    return MetricWriter()
  return _TensorBoardWriter(os.fspath(logdir))
