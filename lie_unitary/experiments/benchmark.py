"""Timing helpers for the benchmark scripts (never used in tests: no timing asserts)."""

from __future__ import annotations

import statistics
import time
from typing import Any
from typing import Callable
from typing import Sequence

import jax

__all__ = ["markdown_table", "time_call"]


def time_call(fn: Callable[..., Any], *args, min_time: float = 0.3, min_repeats: int = 3,
              max_repeats: int = 200) -> float:
  """Median wall time in seconds of `fn(*args)` after one warm-up (compiling) call.

  Every call is waited for with `jax.block_until_ready`, so asynchronous dispatch
  does not hide work. Repeats until `min_time` seconds have passed and at least
  `min_repeats` calls were made (at most `max_repeats`).
  """
  jax.block_until_ready(fn(*args))
  times = []
  start = time.perf_counter()
  while len(times) < max_repeats and (len(times) < min_repeats or
                                      time.perf_counter() - start < min_time):
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    times.append(time.perf_counter() - t0)
  return statistics.median(times)


def markdown_table(rows: Sequence[dict], columns: Sequence[str]) -> str:
  """Renders dict rows as a Markdown table; floats get 3 significant digits."""
  def fmt(v):
    if v is None:
      return "–"
    if isinstance(v, float):
      return f"{v:.3g}"
    return str(v)
  lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
  lines += ["| " + " | ".join(fmt(r.get(c)) for c in columns) + " |" for r in rows]
  return "\n".join(lines)
