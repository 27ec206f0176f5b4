"""What happens around a unit's jitted training calls: resume, checkpoints, stops, progress.

A family's `run_unit` reads top to bottom::

    with loop.Loop(ctx, replicas, target, every=val_every, epoch_steps=E) as lp:
      state, history = lp.restore(fresh_state, history)   # a checkpoint, if any
      for step, num, boundary in lp.calls():
        state, out = train(state, step, num)               # one jitted call
        if boundary and not lp.stopping():                 # a validation point
          lp.doing("evaluating"); ...; lp.show(text)       # its records, the line's metrics
        lp.after_call(state, step + num, history)          # checkpoint, stop

Calls end at every multiple of `every`, at epoch ends and at the target, and last about
`call_seconds` (sized from the measured rate), so a stop is never more than a call and an
evaluation away. Checkpoints (orbax) hold the replicates without sharding's padding, so a
unit stopped on 2 devices resumes on 1 or 3; they are written at a unit's start, at most
every `checkpoint_seconds`, on a stop and at the end, and the two latest are kept: a
damaged one is reported in a line and set aside, and the previous one (or the unit's
start) is used instead. A unit with records but no checkpoint left (lost) is refused,
unless the run says to replace its records and start again. Each checkpoint holds the
code's fingerprint (`workdir.code_fingerprint`): one written by other code is refused,
unless the run says to resume across the change. A thread prints a line every
`progress_seconds`: the step, the epoch, what is running, the last validation metrics and
the ETA. The first SIGINT/SIGTERM (`handle_signals`) ends the current call, checkpoints
and raises `Interrupted`.
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

  def __init__(self, total: float, now: Callable[[], float] | None = None):
    self.total, self._t0, self._w0 = float(total), None, 0.0
    self._now = now or time.perf_counter

  @property
  def started(self) -> bool:
    return self._t0 is not None

  def start(self, done: float) -> None:
    self._t0, self._w0 = self._now(), float(done)

  def eta(self, done: float) -> str:
    """', ETA 3m05s', or '' before a rate is known or when nothing is left."""
    if self._t0 is None or done <= self._w0 or done >= self.total:
      return ""
    rate = (self._now() - self._t0) / (done - self._w0)
    return f", ETA {format_seconds(rate * (self.total - done))}"


def median(values) -> float:
  """The NaN-safe median of a replicate array (for progress lines)."""
  return float(np.nanmedian(np.asarray(values, np.float64)))


def nonfinite_note(values, what: str = "loss") -> str:
  """'; K of N replicates have a nan/inf <what>', or '' when all are finite."""
  bad = int(np.sum(~np.isfinite(np.asarray(values, np.float64))))
  return f"; {bad} of {np.size(values)} replicates have a nan/inf {what}" if bad else ""


class Checkpointer:
  """One unit's (state, JSON metadata) at integer steps, with orbax; the two latest kept.

  Args:
    directory: the unit's checkpoint folder (created on the first save).
  """

  def __init__(self, directory: str):
    import orbax.checkpoint as ocp
    self._ocp = ocp
    self.directory = os.path.abspath(directory)
    self._manager = ocp.CheckpointManager(self.directory, options=ocp.CheckpointManagerOptions(
        max_to_keep=2, create=True, enable_async_checkpointing=False))

  def steps(self) -> list[int]:
    """The steps of the complete checkpoints, newest first."""
    return sorted(self._manager.all_steps(), reverse=True)

  def latest_step(self) -> int | None:
    """The step of the newest complete checkpoint, or None."""
    return self._manager.latest_step()

  def save(self, step: int, state: Any, metadata: dict) -> None:
    """Writes `state` (a pytree of arrays) and `metadata` at `step`; on disk on return."""
    args = self._ocp.args
    self._manager.save(int(step), args=args.Composite(
        state=args.StandardSave(state), meta=args.JsonSave(dict(metadata))), force=True)
    self._manager.wait_until_finished()

  def restore(self, like: Any, step: int | None = None) -> tuple[Any, dict]:
    """The (state, metadata) at `step` (default: the latest), shaped like `like` (None:
    as saved, numpy).

    Raises:
      FileNotFoundError: no checkpoint.
      ValueError: the stored shapes differ from `like`'s; orbax's errors for a damaged one.
    """
    step = self.latest_step() if step is None else step
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

  def set_aside(self, step: int) -> str:
    """Moves the checkpoint at `step` out of the manager's sight (kept, for a look);
    returns its new path."""
    old = os.path.join(self.directory, str(step))
    new = os.path.join(self.directory, f"damaged-{step}-{int(time.time())}")
    os.rename(old, new)
    self._manager.reload()
    return new

  def close(self) -> None:
    self._manager.close()


class Loop:
  """A unit's training loop bookkeeping (module docstring); a context manager.

  Args:
    ctx: the runner's `UnitContext`.
    replicas: the unit's `replicas.Replicas`.
    target: the unit's target step.
    every: calls end at its multiples (validation points); 0: only at the target.
    epoch_steps: > 0: calls end at each epoch's end too (and the line shows the epoch).
    target_field: the config field that sets `target` (for messages).
    call_seconds: the length a call is sized to, once the rate is known; None: calls run
      from boundary to boundary (programs compiled per call length).
    checkpoint_seconds: the longest a crash may lose, besides the call in flight.
    progress_seconds: the time between progress lines.
    clock: seconds from any origin (a test's own clock; default `time.perf_counter`).
  """

  def __init__(self, ctx, replicas, target: int, *, every: int = 0, epoch_steps: int = 0,
               target_field: str = "the target", call_seconds: float | None = 10.0,
               checkpoint_seconds: float = 60.0, progress_seconds: float = 15.0,
               clock: Callable[[], float] | None = None):
    self.ctx, self.replicas, self.target, self.target_field = ctx, replicas, target, target_field
    self.every, self.epoch_steps, self.call_seconds = every, epoch_steps, call_seconds
    self.checkpoint_seconds, self.progress_seconds = checkpoint_seconds, progress_seconds
    self.step, self.elapsed, self.resumed_from = 0, 0.0, 0
    self.activity = "initialising"  # what the progress line says is running (`doing`)
    self._now = clock = clock or time.perf_counter
    self._clock = Clock(target, clock)
    self._ckpt = None
    self._call = None  # (first step, steps, start time) of the call in flight
    self._seconds_per_step = None
    self._shown = ""  # the last validation's metrics, for the line
    self._done = threading.Event()
    self._last_save = self._last = self._since = clock()
    self._evaluating_since = None  # when the call in flight's evaluation began

  def __enter__(self) -> "Loop":
    self._ckpt = Checkpointer(workdir_lib.checkpoint_dir(self.ctx.workdir, self.ctx.unit.slug))
    self._code = workdir_lib.code_fingerprint()  # saved with each checkpoint, checked on resume
    self._ticker = threading.Thread(target=self._tick, daemon=True, name="progress")
    self._ticker.start()
    return self

  def __exit__(self, *exc) -> None:
    self._done.set()
    self._ticker.join()
    self._ckpt.close()

  def say(self, text: str) -> None:
    """Prints a line about the unit."""
    self.ctx.printer(f"{self.ctx.unit.label}: {text}")

  def line(self) -> str:
    """The progress line: step (estimated within a call), epoch, what runs, the last
    validation's metrics, the ETA."""
    step, now, approx = self.step, self._now(), ""
    if self._call is not None and self.activity == "training" and self._seconds_per_step:
      first, num, t0 = self._call
      step, approx = first + min(num, int((now - t0) / self._seconds_per_step)), "≈"
    epoch = f" (epoch {step / self.epoch_steps:.2f})" if self.epoch_steps else ""
    shown = f"; {self._shown}" if self._shown else ""
    since = "" if self.activity == "training" else f" for {format_seconds(now - self._since)}"
    return (f"step {approx}{step}/{self.target}{epoch}, {self.activity}{since}{shown}"
            f"{self._clock.eta(step)}")

  def _tick(self) -> None:
    """A line every `progress_seconds`, whatever is running (a compilation too)."""
    while not self._done.wait(self.progress_seconds):
      self.say(self.line())

  def doing(self, activity: str) -> None:
    """Says what runs now (the line shows it and for how long); "evaluating" during a
    call ends the call's training, whose rate sizes the calls."""
    self.activity, self._since = activity, self._now()
    if activity == "evaluating" and self._call is not None:
      self._evaluating_since = self._since

  def show(self, text: str) -> None:
    """Sets the validation metrics the progress lines show."""
    self._shown = text

  def stopping(self) -> bool:
    """Whether a stop was requested (the family skips an evaluation then; it runs after
    the resume)."""
    return self.ctx.stop.requested()

  def restore(self, state: Any, history: dict | None = None) -> tuple[Any, dict]:
    """The checkpointed (state, history), else the fresh ones given (then checkpointed at
    step 0); sets `step`, `elapsed` and `resumed_from`. A checkpoint that cannot be read
    is named in a line and moved aside, and the one before it used (or the fresh state).

    Raises:
      ConfigError: the checkpoint is beyond the target step, or was written by other code
        (`workdir.code_changes`) and the context's `resume_across_code_change` is False;
        or no checkpoint is left but the unit has records and the context's
        `restart_lost_units` is False.
    """
    history = {} if history is None else history
    for step in self._ckpt.steps():
      try:
        host, meta = self._ckpt.restore(self.replicas.gather(state), step)
      except Exception as e:  # noqa: BLE001 (orbax raises many kinds for damaged files)
        aside = self._ckpt.set_aside(step)
        self.say(f"the checkpoint at step {step} could not be read ({type(e).__name__}: "
                 f"{' '.join(str(e).split())[:160]}); moved to {aside}, "
                 f"{'the previous one is used' if self._ckpt.steps() else 'restarting'}.")
        continue
      self._check_code(step, meta.get("code"))
      self.step, self.elapsed = int(meta["step"]), float(meta["elapsed"])
      if self.step > self.target:
        raise ConfigError(
            f"{self.ctx.unit.label}: its checkpoint is at step {self.step}, beyond "
            f"{self.target_field} = {self.target}; ask for at least {self.step} (its records "
            f"up to {self.target} are in the workdir).")
      state, history = self.replicas.from_host(host, state), dict(meta.get("history", {}))
      self.say(f"resumed at step {self.step} ({format_seconds(self.elapsed)} so far)")
      break
    else:  # no usable checkpoint: a start from step 0, checkpointed before any record
      self._start_afresh()
      self.save(state, history)
    self.resumed_from = self.step
    self._last = self._now()
    return state, history

  def _start_afresh(self) -> None:
    """A unit without a checkpoint but with records (its checkpoint lost) is refused
    (ConfigError), so that no unit's records mix two starts; with the context's
    `restart_lost_units` its records are removed and it starts again."""
    unit, workdir = self.ctx.unit, self.ctx.workdir
    count = workdir_lib.unit_records(workdir, unit.id)
    if not count:
      return
    records = f"{count} record{'s' * (count > 1)}"
    if not getattr(self.ctx, "restart_lost_units", False):
      raise ConfigError(
          f"unit {unit.label} ({unit.id}) has {records} but no checkpoint: rerun with "
          "--restart_lost_units to start it again from step 0, replacing its records.")
    if jax.process_index() == 0:
      workdir_lib.remove_unit_records(workdir, unit.id)
    self.say(f"no checkpoint: its {records} removed, starting again from step 0.")

  def _check_code(self, step: int, code: dict | None) -> None:
    """Refuses (ConfigError) a checkpoint written by other code, unless the context allows
    it (a line then says what changed); a checkpoint with no fingerprint gets a line."""
    if code is None:
      self.say(f"the checkpoint at step {step} predates code fingerprints: resumed without "
               "checking that the code that wrote it is this one.")
      return
    changes = workdir_lib.code_changes(code, self._code)
    if not changes:
      return
    listed = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more" if len(changes) > 6
                                       else "")
    if getattr(self.ctx, "resume_across_code_change", False):
      self.say(f"resuming at step {step} across a code change ({listed}).")
      return
    raise ConfigError(
        f"{self.ctx.unit.label}: its checkpoint at step {step} was written by other code "
        f"({listed}), and a unit must not mix two codes' numbers. Resume with the code that "
        "wrote it (WORKDIR/launches/*.json name its commit), or run it afresh in another "
        "workdir; --resume_across_code_change resumes anyway, for a change that leaves the "
        "numbers alone.")

  def boundary(self, step: int) -> bool:
    """Whether `step` is a validation point: 0, a multiple of `every`, an epoch's end or
    the target."""
    return (step in (0, self.target) or any(p and step % p == 0
                                             for p in (self.every, self.epoch_steps)))

  def calls(self) -> Iterator[tuple[int, int, bool]]:
    """(first step, number of steps, whether it ends at a validation point) of each call
    until the target. A call ends at the next multiple of `every`, epoch end or the
    target, and, once a rate is known, after about `call_seconds`; then the first call
    (it compiles) is one step."""
    while self.step < self.target:
      end = self.target
      for period in (self.every, self.epoch_steps):
        if period:
          end = min(end, (self.step // period + 1) * period)
      num = end - self.step
      if self.call_seconds is not None:
        num = 1 if self._seconds_per_step is None else min(
            num, max(1, int(self.call_seconds / self._seconds_per_step)))
      self._call = (self.step, num, self._now())
      self.doing("compiling and running the first call" if self._seconds_per_step is None
                 else "training")
      yield self.step, num, self.step + num == end

  def seconds(self) -> float:
    """The unit's seconds of training so far, this moment included (for records)."""
    return self.elapsed + self._now() - self._last

  def after_call(self, state: Any, step: int, history: dict) -> None:
    """After a call (and its evaluation) reached `step`: counts its time, checkpoints when
    due, and stops when asked.

    Raises:
      Interrupted: after the checkpoint, when a stop was requested.
    """
    jax.block_until_ready(state)
    now = self._now()
    _, num, t0 = self._call
    if self._seconds_per_step is None:  # what compiling the training program cost
      self.say(f"first call took {((self._evaluating_since or now) - t0):.1f}s: compile and "
               f"{num} update{'s' * (num > 1)}")
    # The rate of training alone (an evaluation after the call is not part of it).
    self._seconds_per_step = ((self._evaluating_since or now) - t0) / num
    self._evaluating_since = None
    self.elapsed += now - self._last  # one clock: records and evaluations count too
    self._last, self.step, self._call = now, step, None
    if not self._clock.started:
      self._clock.start(step)
    stop = self.stopping()
    if stop or (step < self.target and now - self._last_save >= self.checkpoint_seconds):
      self.doing("checkpointing")
      self.save(state, history)
      if stop:
        raise Interrupted(self.ctx.unit.label)

  def save(self, state: Any, history: dict) -> None:
    """Checkpoints the state at the current step (with `elapsed` and `history`)."""
    self._ckpt.save(self.step, self.replicas.gather(state), {
        "step": self.step, "elapsed": self.elapsed,
        "history": workdir_lib.to_jsonable(history), "code": self._code})
    self._last_save = self._now()

  def finish(self, state: Any, history: dict) -> float:
    """Saves the trained state (for `workdir.load_unit`) unless saved at this step;
    returns the unit's seconds of training."""
    if self._ckpt.latest_step() != self.step:
      self.save(state, history)
    self.doing("evaluating")
    return self.elapsed
