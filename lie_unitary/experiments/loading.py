"""Trained parameters and their settings from a workdir, for notebooks.

Every unit saves its final training state (orbax, ``WORKDIR/checkpoints/<unit id>``).
`load_unit(workdir, name)` returns it with the unit's fields and the config of the
launch that listed it::

    from lie_unitary import experiments
    u = experiments.load_unit("runs/table1", "n=6 lie_algebra epochs=1 lr=0.001")
    lam = u.state["train"]["params"]["lam"]      # (replicates, 36) trained λ
    U = lu.unitary_from_lambdas(lam)             # (replicates, 6, 6)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from lie_unitary.experiments import results
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.units import Unit

__all__ = ["LoadedUnit", "load_unit", "unit_names"]


@dataclasses.dataclass(frozen=True)
class LoadedUnit:
  """A unit's saved state and what produced it.

  Attributes:
    id: the unit id (name and fields' hash).
    name: the unit name.
    step: the training step of the saved state.
    state: the saved pytree (nested dicts and lists of numpy arrays, every leaf with a
      leading replicate axis): operators ``{"train": {"params", "opt_state"},
      "target", "constants", "mask"}``; RNNs ``{"params", "opt_state"}``.
    fields: every setting that computed the unit.
    config: the config (JSON) of the latest launch that listed the unit.
    finished: whether the unit reached its target step.
  """
  id: str
  name: str
  step: int
  state: Any
  fields: dict
  config: dict
  finished: bool


def unit_names(workdir: str) -> list[str]:
  """The names of the current units of `workdir` (latest launch wins), in launch order."""
  return list(results.current_unit_ids(workdir))


def load_unit(workdir: str, name_or_id: str) -> LoadedUnit:
  """The saved state of a unit, by name (its current id) or by full id.

  Raises:
    FileNotFoundError: no launch lists that unit, or it has no checkpoint yet.
  """
  from lie_unitary.experiments import checkpoints
  current = results.current_unit_ids(workdir)
  uid = current.get(name_or_id, name_or_id)
  for launch in reversed(workdir_lib.read_launches(workdir)):
    for u in launch["units"]:
      if u["id"] == uid:
        unit = Unit(u["name"], u["fields"], u["target_step"])
        folder = workdir_lib.checkpoint_dir(workdir, unit.slug)
        ckpt = checkpoints.Checkpointer(folder)
        try:
          step = ckpt.latest_step()
          if step is None:
            raise FileNotFoundError(f"unit {uid!r} has no checkpoint in {folder}.")
          state, _ = ckpt.restore(None)
        finally:
          ckpt.close()
        meta_step = int(step)
        finished = (uid, unit.target_step) in workdir_lib.finished_units(workdir)
        return LoadedUnit(uid, unit.name, meta_step, state, dict(unit.fields),
                          launch["config"], finished)
  raise FileNotFoundError(f"no launch in {workdir} lists a unit {name_or_id!r}; current "
                          f"units: {sorted(current)}.")

