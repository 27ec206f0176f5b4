"""The files of an experiment's workdir: named here, and read here.

    WORKDIR/
      launches/NNNN-<time>.json   one per launch: config, provenance, its units (never
                                  overwritten; `provenance.write_launch`)
      results.jsonl               the records of every unit (`runner.UnitContext.write`)
      curves.jsonl                operators: each replicate's validation curve
      finished.jsonl              one line per finished unit (id, target step, seconds)
      checkpoints/<unit>/         the unit's latest training state (orbax)
      tensorboard/<unit>/         TensorBoard events, when asked for
      report.md, *.png            the family's report

Every other module asks this one for a path or a file's records.
"""

from __future__ import annotations

import json
import os

from lie_unitary.experiments import records

__all__ = ["CHECKPOINTS", "CURVES", "FINISHED", "LAUNCHES", "REPORT", "RESULTS", "TENSORBOARD",
           "checkpoint_dir", "finished_units", "launch_files", "path", "read", "read_launches",
           "tensorboard_dir"]

RESULTS = "results.jsonl"
CURVES = "curves.jsonl"
FINISHED = "finished.jsonl"
LAUNCHES = "launches"
CHECKPOINTS = "checkpoints"
TENSORBOARD = "tensorboard"
REPORT = "report.md"


def path(workdir: str | os.PathLike, name: str) -> str:
  """WORKDIR/name."""
  return os.path.join(os.fspath(workdir), name)


def checkpoint_dir(workdir: str | os.PathLike, unit_slug: str) -> str:
  """WORKDIR/checkpoints/<unit slug>: one unit's checkpoints."""
  return os.path.join(os.fspath(workdir), CHECKPOINTS, unit_slug)


def tensorboard_dir(workdir: str | os.PathLike, unit_slug: str) -> str:
  """WORKDIR/tensorboard/<unit slug>: one unit's TensorBoard events."""
  return os.path.join(os.fspath(workdir), TENSORBOARD, unit_slug)


def read(workdir: str | os.PathLike, name: str = RESULTS) -> list[dict]:
  """The complete records of WORKDIR/name ([] when the file does not exist)."""
  return records.read_records(path(workdir, name))


def finished_units(workdir: str | os.PathLike) -> set[tuple[str, int]]:
  """{(unit id, target step)} of the units finished in `workdir`."""
  return {(r["unit"], int(r["step"])) for r in read(workdir, FINISHED)
          if "unit" in r and "step" in r}


def launch_files(workdir: str | os.PathLike) -> list[str]:
  """The launch files of `workdir`, oldest first ([] when there is none).

  Names are ``NNNN-<timestamp>.json`` with NNNN zero-padded and increasing, so the
  name order is the launch order.
  """
  folder = path(workdir, LAUNCHES)
  if not os.path.isdir(folder):
    return []
  return [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".json")]


def read_launches(workdir: str | os.PathLike) -> list[dict]:
  """Every launch of `workdir` (config, provenance, units), oldest first."""
  out = []
  for name in launch_files(workdir):
    with open(name, encoding="utf-8") as f:
      out.append(json.load(f))
  return out
