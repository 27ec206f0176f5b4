"""Loading an experiment workdir's result records, the current units only by default.

A workdir can hold the records of several launches of an experiment. Every launch
writes ``WORKDIR/launches/NNNN-<timestamp>.json`` (``NNNN`` zero-padded, increasing)
listing the units of work it ran, each as ``{"id": ..., "name": ...}``; every record
carries its unit's ``unit`` (the id) and ``unit_name``. A rerun with, say, another
seed gives a unit the same name but another id; a launch of other models into the same
workdir adds units with other names.

The current records are chosen by one rule: walk the launches in order and map each
unit name to the id that the latest launch listing that name gave it; a record is
current when its ``unit`` is one of these ids. Ids a later launch replaced are
*superseded* (`superseded_units`). A workdir without a ``launches/`` folder (made by
hand) has every record that carries a ``unit`` current.

    >>> from lie_unitary.experiments import results
    >>> df = results.load_results("runs/table1")            # a DataFrame with pandas
    >>> recs = results.load_results("runs/table1", as_frame=False)   # a list of dicts
"""

from __future__ import annotations

import json
import os
from typing import Any

from lie_unitary.experiments import records as records_lib
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.workdir import launch_files

__all__ = ["as_records", "current_unit_ids", "launch_files", "load_results",
           "superseded_units"]

_PANDAS_HINT = "pip install lie_unitary[pandas]"


def _launch_units(path: str) -> list[tuple[str, str]]:
  try:
    with open(path, encoding="utf-8") as f:
      launch = json.load(f)
    return [(str(u["name"]), str(u["id"])) for u in launch.get("units", [])]
  except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
    raise ValueError(f"unreadable launch file {path}: {e!r}") from e


def _current_targets(workdir) -> dict[str, int]:
  """{unit id: target step} as the latest launch listing each unit asked for."""
  targets = {}
  for path in launch_files(workdir):
    with open(path, encoding="utf-8") as f:
      for u in json.load(f).get("units", []):
        if "target_step" in u:
          targets[str(u["id"])] = int(u["target_step"])
  return targets


def current_unit_ids(workdir: str | os.PathLike) -> dict[str, str]:
  """Each unit name mapped to its current id: the one the latest launch listing it gave.

  Args:
    workdir: an experiment's working directory.

  Returns:
    ``{unit_name: unit_id}`` over every unit any launch listed; an empty dict when
    the workdir has no launch files (then `load_results` takes every record that has
    a ``unit``).

  Raises:
    ValueError: a launch file is not valid JSON or lacks the ``units`` id/name pairs.
  """
  current: dict[str, str] = {}
  for path in launch_files(workdir):
    for name, uid in _launch_units(path):
      current[name] = uid
  return current


def superseded_units(workdir: str | os.PathLike) -> list[tuple[str, str]]:
  """The units a later launch replaced: same name, another id.

  Args:
    workdir: an experiment's working directory.

  Returns:
    ``[(unit_name, unit_id), ...]`` without repeats, in the order the launches first
    listed them; empty without launch files.

  Raises:
    ValueError: a launch file is not valid JSON or lacks the ``units`` id/name pairs.
  """
  current = current_unit_ids(workdir)
  out: list[tuple[str, str]] = []
  for path in launch_files(workdir):
    for name, uid in _launch_units(path):
      if current[name] != uid and (name, uid) not in out:
        out.append((name, uid))
  return out


def _have_pandas() -> bool:
  try:
    import pandas  # noqa: F401
  except ImportError:
    return False
  return True


def load_results(workdir: str | os.PathLike, file: str = workdir_lib.RESULTS, *,
                 current_only: bool = True, as_frame: bool | None = None) -> Any:
  """The records of ``WORKDIR/<file>``: by default those of the current units only.

  Args:
    workdir: an experiment's working directory.
    file: the JSONL file inside it: ``"results.jsonl"`` (both experiments) or
      ``"curves.jsonl"`` (the operator experiment's validation curves).
    current_only: keep only the records of the current units (see the module
      docstring), and of a unit extended to a later target step only the "final"
      and "curve" records of its current target; False keeps every record,
      superseded ones and ones without a ``unit`` included.
    as_frame: True: a pandas DataFrame; False: a list of dicts; None (default): a
      DataFrame when pandas is importable, else a list of dicts.

  Returns:
    The records in file order, as a ``pandas.DataFrame`` (one row a record, a field a
    column; a field a record lacks is NaN) or a ``list[dict]``. A record written twice
    (a unit resumed after a crash) appears twice; the reports keep the last.

  Raises:
    FileNotFoundError: `workdir` or ``WORKDIR/<file>`` does not exist.
    ValueError: the file holds no records, or none of the current units (none with a
      ``unit`` field, e.g. records from before the unit vocabulary, or none whose
      ``unit`` a launch lists), or a launch file is unreadable.
    ImportError: ``as_frame=True`` and pandas is not installed.
  """
  if as_frame and not _have_pandas():
    raise ImportError(f"load_results(as_frame=True) needs pandas: {_PANDAS_HINT}")
  workdir = os.fspath(workdir)
  if not os.path.isdir(workdir):
    raise FileNotFoundError(f"no workdir {workdir!r}")
  path = workdir_lib.path(workdir, file)
  if not os.path.exists(path):
    raise FileNotFoundError(f"workdir {workdir!r} holds no {file}")
  recs = records_lib.read_records(path)
  if not recs:
    raise ValueError(f"workdir {workdir!r}: {file} holds no records")
  if current_only:
    if launch_files(workdir):
      ids = set(current_unit_ids(workdir).values())
      targets = _current_targets(workdir)
      # A unit extended to a later target step wrote "final" records at both: the
      # earlier ones are not its final results any more.
      recs = [r for r in recs if r.get("unit") in ids and not (
          r.get("kind") in ("final", "curve") and r.get("unit") in targets
          and int(r.get("step", -1)) != targets[r["unit"]])]
      why = "none of a unit that the launches in launches/ list as current"
    else:
      recs = [r for r in recs if "unit" in r]
      why = "none has a 'unit' field (records written before the unit vocabulary?)"
    if not recs:
      raise ValueError(f"workdir {workdir!r}: {file} holds no current records: {why}")
  if as_frame or (as_frame is None and _have_pandas()):
    import pandas as pd
    return pd.DataFrame.from_records(recs)
  return recs


def as_records(results: Any) -> list[dict]:
  """`load_results`' output, a DataFrame or a list of dicts, as a list of dicts.

  Args:
    results: a ``pandas.DataFrame`` (one row a record) or an iterable of dicts.

  Returns:
    One dict per record. From a DataFrame, a float NaN cell is dropped: it stands
    for a field that record lacked (the records themselves store NaN as the string
    ``'nan'``); numpy scalars become Python numbers.
  """
  if hasattr(results, "to_dict") and hasattr(results, "columns"):
    out = []
    for row in results.to_dict("records"):
      rec = {}
      for k, v in row.items():
        if hasattr(v, "item") and not hasattr(v, "__len__"):
          v = v.item()  # numpy scalar
        if isinstance(v, float) and v != v:
          continue
        rec[str(k)] = v
      out.append(rec)
    return out
  return [dict(r) for r in results]
