"""What happens around a unit's jitted training calls: resume, checkpoints, stops, progress.

A family's `run_unit` reads top to bottom::

    with loop.Loop(ctx, replicas, target=unit.target_step) as lp:
      state, history = lp.restore(fresh_state, history)   # the checkpoint, if any
      for step, num in lp.calls(call_steps, epoch_steps):
        state, out = train(state, step, num)               # one jitted call
        ...                                                # records of the call
        lp.after_call(state, step + num, history, status)  # checkpoint, progress, stop

Checkpoints (orbax, the latest only) hold the replicates without sharding's padding, so a
unit stopped on 2 devices resumes on 1 or 3; they are written at most every
`checkpoint_seconds`, on a stop and at the end. A heartbeat thread prints a line at
least every `progress_seconds`, while a call compiles too. The first SIGINT/SIGTERM
(`handle_signals`) ends the current call, checkpoints and raises `Interrupted`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from typing import Any
from typing import Callable
from typing import Iterator

import jax
import numpy as np

from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.fields import ConfigError

__all__ = ["Checkpointer", "Clock", "Interrupted", "Loop", "StopRequest", "format_seconds",
           "handle_signals", "median", "nonfinite_note"]


class Interrupted(Exception):
  """Raised by a loop that stopped on request, after checkpointing."""


class StopRequest:
  """A flag set by the first SIGINT/SIGTERM (or by `request()`)."""

  def __init__(self):
    self._event = threading.Event()
    self.signal_name = ""

  def request(self, why: str = "requested") -> None:
    self.signal_name = why
    self._event.set()

  def requested(self) -> bool:
    return self._event.is_set()


@contextlib.contextmanager
def handle_signals(stop: StopRequest, printer: Callable[[str], None] = print) -> Iterator[None]:
  """Within the block the first SIGINT/SIGTERM sets `stop` and a second aborts
  (KeyboardInterrupt / SystemExit). Outside the main thread it does nothing."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

  def handler(signum, frame):
    if stop.requested():
      for s, h in previous.items():
        signal.signal(s, h)
      if signum == signal.SIGINT:
        raise KeyboardInterrupt
      raise SystemExit(128 + signum)
    stop.request(signal.Signals(signum).name)
    printer(f"{stop.signal_name}: stopping after the current call (checkpointed); send it "
            "again to abort now.")

  for s in previous:
    signal.signal(s, handler)
  try:
    yield
  finally:
    for s, h in previous.items():
      signal.signal(s, h)


def format_seconds(seconds: float) -> str:
  """'7s', '3m05s', '2h01m00s'."""
  h, rem = divmod(int(round(seconds)), 3600)
  m, s = divmod(rem, 60)
  return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


class Clock:
  """The ETA of the work left at the rate measured since `start(done)` (called after the
  work that should not set the pace, such as a compiling first call)."""

  def __init__(self, total: float):
    self.total, self._t0, self._w0 = float(total), None, 0.0

  def start(self, done: float) -> None:
    self._t0, self._w0 = time.perf_counter(), float(done)

  def eta(self, done: float) -> str:
    """', ETA 3m05s', or '' before a rate is known or when nothing is left."""
    if self._t0 is None or done <= self._w0 or done >= self.total:
      return ""
    rate = (time.perf_counter() - self._t0) / (done - self._w0)
    return f", ETA {format_seconds(rate * (self.total - done))}"


def median(values) -> float:
  """The NaN-safe median of a replicate array (for progress lines)."""
  return float(np.nanmedian(np.asarray(values, np.float64)))


def nonfinite_note(values, what: str = "loss") -> str:
  """'; K of N replicates have a nan/inf <what>', or '' when all are finite."""
  bad = int(np.sum(~np.isfinite(np.asarray(values, np.float64))))
  return f"; {bad} of {np.size(values)} replicates have a nan/inf {what}" if bad else ""


class Checkpointer:
  """One unit's (state, JSON metadata) at integer steps, with orbax; the latest only.

  Args:
    directory: the unit's checkpoint folder (created on the first save).
  """

  def __init__(self, directory: str):
    import orbax.checkpoint as ocp
    self._ocp = ocp
    self.directory = os.path.abspath(directory)
    self._manager = ocp.CheckpointManager(self.directory, options=ocp.CheckpointManagerOptions(
        max_to_keep=1, create=True, enable_async_checkpointing=False))

  def latest_step(self) -> int | None:
    """The step of the newest complete checkpoint, or None."""
    return self._manager.latest_step()

  def save(self, step: int, state: Any, metadata: dict) -> None:
    """Writes `state` (a pytree of arrays) and `metadata` at `step`; on disk on return."""
    args = self._ocp.args
    self._manager.save(int(step), args=args.Composite(
        state=args.StandardSave(state), meta=args.JsonSave(dict(metadata))), force=True)
    self._manager.wait_until_finished()

  def restore(self, like: Any) -> tuple[Any, dict]:
    """The latest (state, metadata), shaped like `like` (None: as saved, numpy).

    Raises:
      FileNotFoundError: no checkpoint.
      ValueError: the stored shapes differ from `like`'s.
    """
    step = self.latest_step()
    if step is None:
      raise FileNotFoundError(f"no checkpoint in {self.directory}.")
    args = self._ocp.args
    if like is None:
      out = self._manager.restore(step, args=args.Composite(
          state=args.StandardRestore(), meta=args.JsonRestore()))
      return jax.tree.map(np.asarray, out["state"]), dict(out["meta"])
    abstract = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=getattr(x, "sharding", None)),
        like)
    out = self._manager.restore(step, args=args.Composite(
        state=args.StandardRestore(abstract), meta=args.JsonRestore()))
    got, want = ([np.shape(x) for x in jax.tree.leaves(t)] for t in (out["state"], like))
    if got != want:
      raise ValueError(f"checkpoint in {self.directory} has shapes {got}, expected {want}.")
    return out["state"], dict(out["meta"])

  def close(self) -> None:
    self._manager.close()


class Loop:
  """A unit's training loop bookkeeping (module docstring); a context manager.

  Args:
    ctx: the runner's `UnitContext`.
    replicas: the unit's `replicas.Replicas`.
    target: the unit's target step.
    target_field: the config field that sets `target` (for messages).
    checkpoint_seconds: the longest a crash may lose, besides the call in flight.
    progress_seconds: the longest time without a progress line.
  """

  def __init__(self, ctx, replicas, target: int, *, target_field: str = "the target",
               checkpoint_seconds: float = 60.0, progress_seconds: float = 15.0):
    self.ctx, self.replicas, self.target, self.target_field = ctx, replicas, target, target_field
    self.checkpoint_seconds, self.progress_seconds = checkpoint_seconds, progress_seconds
    self.step, self.elapsed, self.resumed_from = 0, 0.0, 0
    self.status = "initialising"  # what the progress line says while a call runs
    self._clock = Clock(target)
    self._ckpt = None
    self._lock = threading.Lock()
    self._done = threading.Event()
    self._last_line = self._last_save = self._last = time.perf_counter()

  def __enter__(self) -> "Loop":
    self._ckpt = Checkpointer(workdir_lib.checkpoint_dir(self.ctx.workdir, self.ctx.unit.slug))
    self._ticker = threading.Thread(target=self._tick, daemon=True, name="progress")
    self._ticker.start()
    return self

  def __exit__(self, *exc) -> None:
    self._done.set()
    self._ticker.join()
    self._ckpt.close()

  def _line(self, text: str) -> None:
    with self._lock:
      self.ctx.printer(f"{self.ctx.unit.name}: {text}")
      self._last_line = time.perf_counter()

  def _tick(self) -> None:
    """A line while a long call (or its compilation) runs: the unit is alive."""
    while not self._done.wait(min(1.0, self.progress_seconds / 4)):
      now = time.perf_counter()
      if now - self._last_line >= self.progress_seconds:
        self._line(f"step {self.step}/{self.target}, {self.status} for "
                   f"{format_seconds(now - self._last)}")

  def restore(self, state: Any, history: dict | None = None) -> tuple[Any, dict]:
    """The checkpointed (state, history), else the fresh ones given; sets `step`,
    `elapsed` and `resumed_from`.

    Raises:
      ConfigError: the checkpoint is beyond the target step.
    """
    history = {} if history is None else history
    if self._ckpt.latest_step() is not None:
      host, meta = self._ckpt.restore(self.replicas.gather(state))
      self.step, self.elapsed = int(meta["step"]), float(meta["elapsed"])
      if self.step > self.target:
        raise ConfigError(
            f"{self.ctx.unit.name}: its checkpoint is at step {self.step}, beyond "
            f"{self.target_field} = {self.target}; ask for at least {self.step} (its records "
            f"up to {self.target} are in the workdir).")
      state, history = self.replicas.from_host(host, state), dict(meta.get("history", {}))
      self._line(f"resumed at step {self.step} ({self.elapsed:.0f}s so far)")
    self.resumed_from = self.step
    self._last = time.perf_counter()
    self.status = "compiling and running the first call"
    return state, history

  def calls(self, call_steps: int, epoch_steps: int = 0) -> Iterator[tuple[int, int]]:
    """(first step, number of steps) of each call until the target: at most
    `call_steps`, never across an epoch's end (`epoch_steps` > 0)."""
    # Whatever ran since `restore` (an initial evaluation) is done.
    self.status = "compiling and running the first call"
    while self.step < self.target:
      num = min(call_steps, self.target - self.step)
      if epoch_steps:
        num = min(num, epoch_steps - self.step % epoch_steps)
      yield self.step, num

  def seconds(self) -> float:
    """The unit's seconds of training so far, this moment included (for records)."""
    return self.elapsed + time.perf_counter() - self._last

  def after_call(self, state: Any, step: int, history: dict, status: str = "") -> None:
    """After a call reached `step`: counts its time, checkpoints and prints progress when
    due, and stops when asked.

    Raises:
      Interrupted: after the checkpoint, when a stop was requested.
    """
    jax.block_until_ready(state)
    now = time.perf_counter()
    self.elapsed += now - self._last  # one clock: records and evaluations count too
    self._last, self.step = now, step
    if self._clock._t0 is None:
      self._clock.start(step)
    self.status = "training"
    stop = self.ctx.stop.requested()
    if stop or (step < self.target and now - self._last_save >= self.checkpoint_seconds):
      self.save(state, history)
      if stop:
        raise Interrupted(self.ctx.unit.name)
    if step < self.target and now - self._last_line >= self.progress_seconds:
      self._line(f"step {step}/{self.target}{', ' + status if status else ''}"
                 f"{self._clock.eta(step)}")

  def save(self, state: Any, history: dict) -> None:
    """Checkpoints the state at the current step (with `elapsed` and `history`)."""
    self._ckpt.save(self.step, self.replicas.gather(state), {
        "step": self.step, "elapsed": self.elapsed,
        "history": workdir_lib.to_jsonable(history)})
    self._last_save = time.perf_counter()

  def finish(self, state: Any, history: dict) -> float:
    """Saves the trained state (for `workdir.load_unit`) unless saved at this step;
    returns the unit's seconds of training."""
    if self._ckpt.latest_step() != self.step:
      self.save(state, history)
    self.status = "evaluating"
    return self.elapsed
