"""The one chunked training loop of both families: resume, progress, checkpoints, stops.

A unit trains as a sequence of jitted calls ("chunks"), each advancing every replicate
by up to `call_steps` steps. `run_chunks` owns what happens around them:

- **resume**: the unit's latest checkpoint (state, step, elapsed seconds and the
  family's JSON `history`) is restored before the first chunk. Checkpoints hold the
  replicates WITHOUT the padding that sharding over devices adds, so a unit stopped on
  2 devices resumes on 1 or 3 with the numbers of an uninterrupted run;
- **epochs**: `epoch_data(state, epoch)` (e.g. the epoch's data order) is computed once
  per epoch and passed to every chunk of it; it is never stored, since it is a pure
  function of the unit's keys;
- **checkpoints**: at most every `checkpoint_seconds`, on a stop request, and at the
  end (the trained state, for `lie_unitary.experiments.load_unit`);
- **progress**: a line at most every `progress_seconds` with the family's status and an
  ETA from this unit's own rate since the loop (re)started, its first chunk (which
  compiles) left out;
- **stops**: after a SIGINT/SIGTERM the loop checkpoints and raises
  `interrupts.Interrupted` (the runner says how to resume).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any
from typing import Callable

import jax
import numpy as np

from lie_unitary.experiments import interrupts
from lie_unitary.experiments import records
from lie_unitary.experiments.fields import ConfigError

__all__ = ["Chunks", "Outcome", "run_chunks"]


@dataclasses.dataclass
class Chunks:
  """A unit's training, as the loop drives it (every function acts on all replicates).

  Attributes:
    init: () -> (state, history): the fresh state (replicate axis padded and sharded)
      and the family's JSON-able bookkeeping at step 0 (e.g. the initial validation
      point); on resume the checkpoint's history replaces it.
    advance: (state, epoch data, step, num_steps) -> (state, output): one jitted call
      that makes `num_steps` steps from `step` (never crossing an epoch's end).
    total_steps: the unit's target step.
    call_steps: steps per call (the last call of a run may make fewer).
    epoch_steps: steps per epoch (0: no epochs; `epoch_data` is then called once).
    epoch_data: (state, epoch) -> data for every call of that epoch; None: no data.
    after_call: (state, step, output, history, elapsed) -> None, after every call
      (records, TensorBoard scalars, curves into `history`); `step` is the step
      reached, `elapsed` the unit's seconds of training so far.
    status: (step, output) -> str, the progress line's middle part (e.g. the median
      validation loss).
    to_host, from_host: the state without the replicate padding as numpy arrays,
      and back (`sweep.Replicas`): checkpoints hold the host form.
    target_field: the config field that sets `total_steps` (for messages).
  """
  init: Callable[[], tuple[Any, dict]]
  advance: Callable[[Any, Any, int, int], tuple[Any, Any]]
  total_steps: int
  call_steps: int
  to_host: Callable[[Any], Any]
  from_host: Callable[[Any, Any], Any]
  epoch_steps: int = 0
  epoch_data: Callable[[Any, int], Any] | None = None
  after_call: Callable[[Any, int, Any, dict, float], None] = lambda *_: None
  status: Callable[[int, Any], str] = lambda step, out: ""
  target_field: str = "the target"


@dataclasses.dataclass
class Outcome:
  """What the loop leaves: the trained state, seconds of training, the history, and
  the step it started from (0, or the resumed checkpoint's)."""
  state: Any
  elapsed: float
  history: dict
  resumed_from: int


def run_chunks(ctx, chunks: Chunks, *, checkpoint_seconds: float = 60.0,
               progress_seconds: float = 15.0) -> Outcome:
  """Trains a unit to `chunks.total_steps`, resuming from and writing its checkpoints.

  Args:
    ctx: the runner's `UnitContext` (checkpointer, printer, stop request, unit name).
    chunks: the unit's training (`Chunks`).
    checkpoint_seconds: the longest a crash may lose (besides the chunk in flight).
    progress_seconds: the shortest time between progress lines.

  Returns:
    An `Outcome`.

  Raises:
    interrupts.Interrupted: after a checkpoint, when a stop was requested.
    ConfigError: the unit's checkpoint is beyond its target step.
  """
  name, target = ctx.unit.name, chunks.total_steps
  state, history = chunks.init()
  step, elapsed = 0, 0.0
  ckpt = ctx.checkpointer()
  try:
    if ckpt.latest_step() is not None:
      host, meta = ckpt.restore(chunks.to_host(state))
      step, elapsed = int(meta["step"]), float(meta["elapsed"])
      if step > target:
        raise ConfigError(
            f"{name}: its checkpoint is at step {step}, beyond {chunks.target_field} = "
            f"{target}; ask for at least {step} (its records up to {target} are in the "
            "workdir).")
      state, history = chunks.from_host(host, state), dict(meta.get("history", {}))
      ctx.printer(f"{name}: resumed at step {step} ({elapsed:.0f}s so far)")
    resumed_from = step

    def save():
      ckpt.save(step, chunks.to_host(state), {"step": step, "elapsed": elapsed,
                                              "history": records.to_jsonable(history)})

    data, data_epoch = None, None
    last = last_save = last_line = time.perf_counter()
    rate_start = None  # (time, step) after the first (compiling) call
    while step < target:
      if chunks.epoch_data is not None:
        epoch = step // chunks.epoch_steps if chunks.epoch_steps else 0
        if epoch != data_epoch:
          data, data_epoch = chunks.epoch_data(state, epoch), epoch
      num = min(chunks.call_steps, target - step)
      if chunks.epoch_steps:
        num = min(num, chunks.epoch_steps - step % chunks.epoch_steps)
      state, out = chunks.advance(state, data, step, num)
      step += num
      jax.block_until_ready(out)
      # One clock from the loop's start: what runs between the calls (records,
      # evaluations, checkpoints) counts too.
      now = time.perf_counter()
      elapsed, last = elapsed + now - last, now
      chunks.after_call(state, step, out, history, elapsed)
      if rate_start is None:
        rate_start = (now, step)
      stop = ctx.stop.requested()
      if stop or (step < target and now - last_save >= checkpoint_seconds):
        save()
        last_save = now
        ctx.check_stop()
      if step < target and now - last_line >= progress_seconds:
        ctx.printer(f"{name}: step {step}/{target}{_part(chunks.status(step, out))}"
                    f"{_eta(rate_start, now, step, target)}")
        last_line = now
    if ckpt.latest_step() != step:  # the trained state, for load_unit
      save()
    return Outcome(state, elapsed, history, resumed_from)
  finally:
    ckpt.close()


def _part(text: str) -> str:
  return f", {text}" if text else ""


def _eta(rate_start, now: float, step: int, target: int) -> str:
  t, s = rate_start
  if step <= s or now <= t:
    return ""
  return f", ETA {_seconds((target - step) * (now - t) / (step - s))}"


def _seconds(seconds: float) -> str:
  seconds = int(round(seconds))
  h, rem = divmod(seconds, 3600)
  m, s = divmod(rem, 60)
  return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def median(values) -> float:
  """The median of a replicate array (NaN-safe for the progress line)."""
  return float(np.nanmedian(np.asarray(values, np.float64)))


def nonfinite_note(values, what: str = "loss") -> str:
  """'; K of N replicates have a nan/inf <what>' for a replicate array, or '' if all
  are finite: a progress line whose headline metric (e.g. an accuracy) hides a
  diverged replicate says so."""
  values = np.asarray(values, np.float64)
  bad = int(np.sum(~np.isfinite(values)))
  return f"; {bad} of {values.size} replicates have a nan/inf {what}" if bad else ""


# Re-exported so families need one import for the loop and its stop.
Interrupted = interrupts.Interrupted
