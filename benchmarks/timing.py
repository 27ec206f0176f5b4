"""The shared timer: variants compared round-robin in one process, one table, one JSON.

A variant is a function of no arguments that runs one call of the timed work, waits for
it, and returns how many items (steps, examples, ...) it did. `compare` warms each up,
then runs --rounds rounds, each calling every variant in turn (the order reversed every
other round) for --seconds; a variant's best round is its estimate.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable

from absl import flags
import jax

ROUNDS = flags.DEFINE_integer("rounds", 5, "Round-robin rounds; a variant's best counts.")
SECONDS = flags.DEFINE_float("seconds", 0.3, "Seconds each variant runs per round (≥ 1 call).")
JSON = flags.DEFINE_string("json", None, "Also write the rows and the machine to this file.")


def compare(variants: dict[str, Callable[[], float]], *, warmup: bool = True,
            say: Callable[..., None] = print) -> dict[str, list[float]]:
  """Seconds per item of each variant, one entry per round (see the module docstring)."""
  if warmup:
    for fn in variants.values():
      fn()
  names, samples = list(variants), {name: [] for name in variants}
  for r in range(ROUNDS.value):
    for name in names if r % 2 == 0 else names[::-1]:
      items, start = 0.0, time.perf_counter()
      while items == 0 or time.perf_counter() - start < SECONDS.value:
        items += variants[name]() or 1
      samples[name].append((time.perf_counter() - start) / items)
    say(f"  round {r + 1}: " + ", ".join(f"{k} {1e3 * min(v):.4g} ms" for k, v in samples.items()),
        flush=True)
  return samples


def blocking(fn: Callable, *args, items: float = 1) -> Callable[[], float]:
  """A variant that calls `fn(*args)` and waits for its outputs."""
  def call():
    jax.block_until_ready(fn(*args))
    return items
  return call


def rows(group: dict, samples: dict[str, list[float]], reference: str | None = None,
         per: str = "") -> list[dict]:
  """Table rows of one `compare`: best and median ms per item, items/s if `per` names
  them, and each best over the reference's best (default: the first variant)."""
  reference = reference if reference in samples else next(iter(samples))
  ref = min(samples[reference])
  out = []
  for name, s in samples.items():
    row = {**group, "variant": name, "best_ms": 1e3 * min(s),
           "median_ms": 1e3 * statistics.median(s)}
    if per:
      row[f"{per}/s"] = 1 / min(s)
    row[f"÷ {reference}"] = min(s) / ref
    out.append(row)
  return out


def cpu_model() -> str:
  """The CPU's model name (/proc/cpuinfo's first, else `platform.processor()`)."""
  try:
    with open("/proc/cpuinfo") as f:
      return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
  except (OSError, StopIteration):
    return platform.processor()


def commit() -> str | None:
  """The checked-out commit, with "+dirty" when tracked files differ from it."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  git = lambda *a: subprocess.run(["git", "-C", root, *a], capture_output=True, text=True)
  head = git("rev-parse", "HEAD")
  if head.returncode:
    return None
  dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
  return head.stdout.strip() + ("+dirty" if dirty else "")


def machine() -> dict:
  """What the numbers were measured on, and the code's commit."""
  d = jax.devices()[0]
  return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
          "command": " ".join(["python -m benchmarks"] + sys.argv[1:]), "commit": commit(),
          "jax": jax.__version__, "backend": jax.default_backend(), "device": d.device_kind,
          "devices": jax.device_count(), "cpus": os.cpu_count(), "cpu": cpu_model(),
          "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS"),
          "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}


def _fmt(v) -> str:
  if isinstance(v, float):
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
  return "–" if v is None else str(v)


def report(table: list[dict], *, note: str = "", **extra) -> None:
  """Prints the rows as one Markdown table; writes them, `machine()` and `extra` to --json."""
  meta = machine()
  columns = list(dict.fromkeys(k for row in table for k in row))
  print(f"\n{meta['command']}\n{meta['date']}: jax {meta['jax']} on {meta['backend']} "
        f"({meta['device']}, {meta['devices']} device(s)), OPENBLAS_NUM_THREADS="
        f"{meta['OPENBLAS_NUM_THREADS']}; best of {ROUNDS.value} rounds"
        + (f"; {note}" if note else ""))
  print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
  for row in table:
    print("| " + " | ".join(_fmt(row.get(c)) for c in columns) + " |")
  if JSON.value:
    with open(JSON.value, "w") as f:
      json.dump({**meta, "rounds": ROUNDS.value, "seconds": SECONDS.value, **extra,
                 "rows": table}, f, indent=1)
    print(f"rows written to {JSON.value}")
