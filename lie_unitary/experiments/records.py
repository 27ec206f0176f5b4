"""Append-only JSONL result records and the runner's progress lines.

Records are JSON objects appended as they are made (a unit's validation points per
chunk, its final results), flushed and fsynced, so a run killed at any moment keeps
every record written before; a half-written last line is ignored when read. Which
units are finished is recorded apart (`workdir.finished_units`).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import time
from typing import Any
from typing import Iterable

__all__ = ["SPECTRUM_FIELDS", "Progress", "append_records", "read_records", "to_jsonable"]

# The record names of `lie_unitary.principal_branch.SpectrumStats`' fields (in its
# order): the spectrum diagnostics of a λ chart, in both families' records.
SPECTRUM_FIELDS = ("theta_spread", "theta_max_abs", "min_sinc", "wide_share")


def to_jsonable(value: Any) -> Any:
  """Arrays as lists; NaN and ±inf as the strings 'nan', 'inf', '-inf' (JSON has none)."""
  if hasattr(value, "tolist"):  # numpy / jax arrays and scalars
    value = value.tolist()
  if isinstance(value, float) and not math.isfinite(value):
    return repr(value)  # JSON has no NaN/inf; keep them readable rather than invalid
  if isinstance(value, dict):
    return {str(k): to_jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [to_jsonable(v) for v in value]
  return value


def append_records(path: str | os.PathLike, records: Iterable[dict]) -> None:
  """Appends records as JSON lines and fsyncs, so they survive a crash right after.

  Arrays become lists; NaN and ±inf become the strings 'nan', 'inf', '-inf'.
  """
  lines = "".join(json.dumps(to_jsonable(r), sort_keys=True) + "\n" for r in records)
  if not lines:
    return
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with open(path, "a", encoding="utf-8") as f:
    # Worker processes (--num_workers) append to the same file: one at a time.
    fcntl.flock(f, fcntl.LOCK_EX)
    try:
      f.write(lines)
      f.flush()
      os.fsync(f.fileno())
    finally:
      fcntl.flock(f, fcntl.LOCK_UN)


def read_records(path: str | os.PathLike) -> list[dict]:
  """Reads every complete record; a half-written last line (a crash) is ignored."""
  if not os.path.exists(path):
    return []
  out = []
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      if not line:
        continue
      try:
        out.append(json.loads(line))
      except json.JSONDecodeError:
        continue
  return out


def _fmt(seconds: float) -> str:
  seconds = int(round(seconds))
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class Progress:
  """Prints one line per finished unit: its time, the elapsed total and an ETA.

  The ETA weighs the units by their relative `cost` (`units.Unit.cost`): the seconds
  per unit of cost of the units computed in this process, times the cost still to
  run, so a fast first unit (a baseline) does not set the pace of the trained ones.
  Skipped units cost nothing; with `parallel` worker processes sharing the units it
  is divided by their number.
  """

  def __init__(self, costs: Iterable[float], printer=print, parallel: int = 1):
    self._remaining = [float(c) for c in costs]
    self.total = len(self._remaining)
    self._left = sum(self._remaining)
    self._parallel = max(1, parallel)
    self.done = 0
    self._print = printer
    self._start = self._unit_start = time.perf_counter()
    self._cost_done = 0.0
    self._compute_time = 0.0

  def skip(self, label: str, cost: float = 0.0, reason: str = "already done") -> None:
    """Marks a unit found finished on disk (or taken by another worker process)."""
    self.done += 1
    self._left -= cost
    self._print(f"[{self.done}/{self.total}] {label}: {reason}, skipped")
    self._unit_start = time.perf_counter()

  def finish(self, label: str, cost: float = 1.0) -> float:
    """Marks a unit computed; prints and returns its wall time in seconds."""
    now = time.perf_counter()
    unit = now - self._unit_start
    self.done += 1
    self._left -= cost
    self._cost_done += cost
    self._compute_time += unit
    eta = ""
    if self.done < self.total and self._cost_done > 0:
      seconds = self._compute_time / self._cost_done * max(self._left, 0.0) / self._parallel
      eta = f", ETA {_fmt(seconds)}"
    self._print(f"[{self.done}/{self.total}] {label}: {unit:.1f}s "
                f"(elapsed {_fmt(now - self._start)}{eta})")
    self._unit_start = now
    return unit
