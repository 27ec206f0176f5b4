"""Checkpoints of a unit's training state, with orbax.

One folder per unit, ``WORKDIR/checkpoints/<unit id>/``, so a checkpoint is only
ever restored into the unit (the same fields) that wrote it. The state is any
pytree of arrays (stacked over replicates, sharded or not); beside it a small JSON
of the loop's own counters (step, elapsed seconds, ...). Only the latest step is
kept. Saving is synchronous: when `save` returns, the checkpoint is on disk.
"""

from __future__ import annotations

import os
from typing import Any

import jax
import numpy as np

__all__ = ["Checkpointer"]


class Checkpointer:
  """Saves and restores one unit's (state, metadata) at integer steps.

  Args:
    directory: the unit's checkpoint folder (created on the first save).
  """

  def __init__(self, directory: str):
    import orbax.checkpoint as ocp
    self._ocp = ocp
    self.directory = os.path.abspath(directory)
    self._manager = ocp.CheckpointManager(
        self.directory,
        options=ocp.CheckpointManagerOptions(max_to_keep=1, create=True,
                                             enable_async_checkpointing=False))

  def latest_step(self) -> int | None:
    """The step of the newest complete checkpoint, or None."""
    return self._manager.latest_step()

  def save(self, step: int, state: Any, metadata: dict) -> None:
    """Writes `state` (a pytree of arrays) and `metadata` (JSON-able) at `step`."""
    args = self._ocp.args
    self._manager.save(int(step), args=args.Composite(
        state=args.StandardSave(state), meta=args.JsonSave(dict(metadata))), force=True)
    self._manager.wait_until_finished()

  def restore(self, like: Any) -> tuple[Any, dict]:
    """The latest (state, metadata), with `like`'s tree structure, shapes and shardings
    (``like=None``: as saved, nested dicts/lists of numpy arrays).

    Raises:
      FileNotFoundError: when there is no checkpoint.
      ValueError: when the stored state's shapes differ from `like`'s.
    """
    step = self.latest_step()
    if step is None:
      raise FileNotFoundError(f"no checkpoint in {self.directory}.")
    args = self._ocp.args
    if like is None:
      out = self._manager.restore(step, args=args.Composite(
          state=args.StandardRestore(), meta=args.JsonRestore()))
      return jax.tree.map(np.asarray, out["state"]), dict(out["meta"])
    abstract = jax.tree.map(self._abstract, like)
    out = self._manager.restore(step, args=args.Composite(
        state=args.StandardRestore(abstract), meta=args.JsonRestore()))
    got = [np.shape(x) for x in jax.tree.leaves(out["state"])]
    want = [np.shape(x) for x in jax.tree.leaves(like)]
    if got != want:
      raise ValueError(f"checkpoint in {self.directory} has shapes {got}, expected {want}.")
    return out["state"], dict(out["meta"])

  @staticmethod
  def _abstract(x):
    sharding = getattr(x, "sharding", None)
    return jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding)

  def close(self) -> None:
    self._manager.close()
