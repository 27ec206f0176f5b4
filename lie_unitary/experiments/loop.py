"""One unit's training, read top to bottom: `train_unit(task, ctx, replicas)`.

A family declares a unit's training as a `Task` of pure functions (init, train a call's
steps, evaluate, finish); `train_unit` restores the unit's checkpoint, then trains call
by call to the target, evaluating at each validation point (0, every `every` steps, an
epoch's end, the target), writing the records and checkpointing; then the final records.

Calls end at validation points and last about `call_seconds` (sized from the measured
rate; the first, which compiles, is one step), so a stop is never more than a call and an
evaluation away. Checkpoints (orbax) hold the replicates without sharding's padding (a
unit stopped on 2 devices resumes on 1 or 3), are written at the start, at most every
`checkpoint_seconds`, on a stop and at the end; the two latest are kept, and a damaged
one is named in a line, set aside and the one before it used. A unit with records but no
checkpoint (lost) is refused unless the run says to replace its records; one checkpointed
by other code (`workdir.code_fingerprint`) unless it says to resume across the change. A
thread prints a line every `progress_seconds` (step, epoch, what runs, the last metrics,
ETA). The first SIGINT/SIGTERM (`handle_signals`) ends the call, checkpoints and raises
`Interrupted`.
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
from typing import NamedTuple

import jax
import numpy as np

from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.fields import ConfigError

__all__ = ["Checkpointer", "Clock", "Interrupted", "StopRequest", "Task", "call_length",
           "format_seconds", "handle_signals", "median", "nonfinite_note", "train_unit",
           "validation_point"]


class Task(NamedTuple):
  """One unit's training as a family declares it to `train_unit`: pure functions of the
  state (a pytree of arrays, leading axis the padded replicates, sharded) and the history
  (the family's JSON-able bookkeeping: a curve, an interval's running sums). Both are
  checkpointed.

  Attributes:
    init: () -> (fresh state, fresh history).
    train: (state, history, first step, number of steps) -> (state, history): one call.
    evaluate: (state, history, step) -> (records, history, metrics text) at a validation
      point: records for results.jsonl, the progress line's metrics.
    finish: (state, history) -> {file name: records} of the trained unit, written in that
      order.
    target: the step to train to.
    every: validation points at its multiples (0: at 0 and the target only).
    epoch_steps: > 0: validation points at each epoch's end too; the line shows the epoch.
    call_seconds: the length a call is sized to once the rate is known; None: calls run
      from validation point to validation point.
    target_field: the config field that sets `target` (for messages).
  """
  init: Callable[[], tuple[Any, dict]]
  train: Callable[[Any, dict, int, int], tuple[Any, dict]]
  evaluate: Callable[[Any, dict, int], tuple[list[dict], dict, str]]
  finish: Callable[[Any, dict], dict[str, list[dict]]]
  target: int
  every: int = 0
  epoch_steps: int = 0
  call_seconds: float | None = 10.0
  target_field: str = "the target"


def train_unit(task: Task, ctx, replicas, *, clock: Callable[[], float] | None = None,
               checkpoint_seconds: float = 60.0, progress_seconds: float = 15.0) -> None:
  """Trains one unit to `task.target` from its checkpoint (module docstring); writes the
  evaluations' records and then `task.finish`'s, each record of results.jsonl with the
  unit's ``seconds`` so far (training, evaluations and records; across resumes).

  Args:
    task: the unit's `Task`.
    ctx: the runner's `UnitContext` (workdir, unit, printer, stop request, permissions).
    replicas: the unit's `replicas.Replicas` (checkpoints hold its R replicates).
    clock: seconds from any origin (default `time.perf_counter`; a test's own).
    checkpoint_seconds: the longest a crash may lose, besides the call in flight.
    progress_seconds: the time between progress lines.

  Raises:
    Interrupted: after a checkpoint, when `ctx.stop` was requested.
    ConfigError: a checkpoint beyond the target, or written by other code (unless
      `ctx.resume_across_code_change`); records but no checkpoint (unless
      `ctx.restart_lost_units`).
  """
  now = clock or time.perf_counter
  say = lambda text: ctx.printer(f"{ctx.unit.label}: {text}")
  progress = _Progress(task, now)
  ckpt = Checkpointer(workdir_lib.checkpoint_dir(ctx.workdir, ctx.unit.slug))
  code = workdir_lib.code_fingerprint()  # saved with each checkpoint, checked on resume
  done = threading.Event()

  def tick() -> None:  # a line every `progress_seconds`, whatever runs (a compilation too)
    while not done.wait(progress_seconds):
      say(progress.line())

  ticker = threading.Thread(target=tick, daemon=True, name="progress")
  ticker.start()
  try:
    state, history = task.init()
    state, meta = _restore(task, ctx, replicas, ckpt, code, state, say)
    written = ctx.written()  # read after `_restore` (it may remove a lost unit's records)
    step, elapsed, owed = 0, 0.0, True  # owed: the evaluation at `step` is still to run
    if meta is not None:
      history, step, elapsed = dict(meta.get("history", {})), meta["step"], meta["elapsed"]
      owed = meta.get("owed", validation_point(task, step) and not any(
          s == step for _, _, s in written))
    progress.step, start = step, now()
    seconds = lambda: elapsed + now() - start  # the unit's, across resumes

    def checkpoint(owed: bool) -> None:
      nonlocal last_save
      progress.doing("checkpointing")
      ckpt.save(step, replicas.gather(state), {
          "step": step, "elapsed": seconds(), "history": workdir_lib.to_jsonable(history),
          "code": code, "owed": owed})
      last_save = now()

    def write(records, file=workdir_lib.RESULTS) -> None:  # those of a resumed unit once
      if file == workdir_lib.RESULTS:
        records = [{**r, "seconds": round(seconds(), 3)} for r in records
                   if (r.get("kind"), r.get("replicate"), r.get("step")) not in written]
      ctx.write(records, file)

    def evaluate() -> None:
      nonlocal history
      progress.doing("evaluating")
      records, history, progress.shown = task.evaluate(state, history, step)
      write(records)

    last_save = start
    if meta is None:  # a start: checkpointed before any record
      checkpoint(owed)
    if owed:  # the initial state's evaluation, or one a stop left owed
      evaluate()
    while step < task.target:
      num, t0 = call_length(task, step, progress.rate), now()
      progress.call = (step, num, t0)
      progress.doing("compiling and running the first call" if progress.rate is None
                      else "training")
      state, history = task.train(state, history, step, num)
      jax.block_until_ready(state)
      if progress.rate is None:
        say(f"first call took {now() - t0:.1f}s: compile and {num} update{'s' * (num > 1)}")
        progress.eta.start(step + num)  # the compiling call does not set the pace
      progress.rate, progress.call = (now() - t0) / num, None
      step = progress.step = step + num
      owed = validation_point(task, step)
      if owed and not ctx.stop.requested():  # at a stop it runs after the resume
        evaluate()
        owed = False
      stop = ctx.stop.requested()
      if stop or (step < task.target and now() - last_save >= checkpoint_seconds):
        checkpoint(owed)
        if stop:
          raise Interrupted(ctx.unit.label)
    if ckpt.latest_step() != step:  # the trained state, for `workdir.load_unit`
      checkpoint(False)
    progress.doing("finishing")
    for file, records in task.finish(state, history).items():
      write(records, file)
  finally:
    done.set()
    ticker.join()
    ckpt.close()


def validation_point(task: Task, step: int) -> bool:
  """Whether `step` is 0, the target, a multiple of `task.every` or an epoch's end."""
  return step in (0, task.target) or any(p and step % p == 0
                                         for p in (task.every, task.epoch_steps))


def call_length(task: Task, step: int, seconds_per_step: float | None) -> int:
  """The steps of the call from `step`: up to the next validation point and, with
  `task.call_seconds`, about that long at `seconds_per_step`; None (no rate yet: the
  call compiles) gives one step."""
  end = min([task.target] + [(step // p + 1) * p for p in (task.every, task.epoch_steps) if p])
  if task.call_seconds is None:
    return end - step
  if seconds_per_step is None:
    return 1
  return min(end - step, max(1, int(task.call_seconds / seconds_per_step)))


class _Progress:
  """What the progress line says (`line`), updated by `train_unit` as the unit runs."""

  def __init__(self, task: Task, now: Callable[[], float]):
    self.task, self.now, self.eta = task, now, Clock(task.target, now)
    self.step, self.rate, self.shown = 0, None, ""  # rate: seconds per step of training
    self.call = None  # (first step, steps, start time) of the call in flight
    self.doing("initialising")

  def doing(self, activity: str) -> None:
    self.activity, self.since = activity, self.now()

  def line(self) -> str:
    """The step (estimated within a call), the epoch, what runs (and for how long, but
    training), the last validation's metrics, the ETA."""
    step, now, approx, call = self.step, self.now(), "", self.call
    if call is not None and self.activity == "training" and self.rate:
      step, approx = call[0] + min(call[1], int((now - call[2]) / self.rate)), "≈"
    epoch = f" (epoch {step / self.task.epoch_steps:.2f})" if self.task.epoch_steps else ""
    since = "" if self.activity == "training" else f" for {format_seconds(now - self.since)}"
    shown = f"; {self.shown}" if self.shown else ""
    return (f"step {approx}{step}/{self.task.target}{epoch}, {self.activity}{since}{shown}"
            f"{self.eta.eta(step)}")


def _restore(task: Task, ctx, replicas, ckpt: Checkpointer, code: dict, state: Any,
             say: Callable[[str], None]) -> tuple[Any, dict | None]:
  """The newest readable checkpoint's (state on the devices, metadata), else (the fresh
  `state`, None). A checkpoint that cannot be read is named in a line, moved aside and
  the one before it tried. Raises ConfigError as `train_unit`."""
  for step in ckpt.steps():
    try:
      host, meta = ckpt.restore(replicas.gather(state), step)
    except Exception as e:  # noqa: BLE001 (orbax raises many kinds for damaged files)
      aside = ckpt.set_aside(step)
      say(f"the checkpoint at step {step} could not be read ({type(e).__name__}: "
          f"{' '.join(str(e).split())[:160]}); moved to {aside}, "
          f"{'the previous one is used' if ckpt.steps() else 'restarting'}.")
      continue
    _check_code(ctx, step, meta.get("code"), code, say)
    if meta["step"] > task.target:
      raise ConfigError(
          f"{ctx.unit.label}: its checkpoint is at step {meta['step']}, beyond "
          f"{task.target_field} = {task.target}; ask for at least {meta['step']} (its "
          f"records up to {task.target} are in the workdir).")
    say(f"resumed at step {meta['step']} ({format_seconds(meta['elapsed'])} so far)")
    return replicas.from_host(host, state), meta
  _start_afresh(ctx, say)
  return state, None


def _start_afresh(ctx, say: Callable[[str], None]) -> None:
  """A unit without a checkpoint but with records (its checkpoint lost) is refused
  (ConfigError), so that no unit's records mix two starts; with the context's
  `restart_lost_units` its records are removed and it starts again."""
  unit, workdir = ctx.unit, ctx.workdir
  count = workdir_lib.unit_records(workdir, unit.id)
  if not count:
    return
  records = f"{count} record{'s' * (count > 1)}"
  if not ctx.restart_lost_units:
    raise ConfigError(
        f"unit {unit.label} ({unit.id}) has {records} but no checkpoint: rerun with "
        "--restart_lost_units to start it again from step 0, replacing its records.")
  if jax.process_index() == 0:
    workdir_lib.remove_unit_records(workdir, unit.id)
  say(f"no checkpoint: its {records} removed, starting again from step 0.")


def _check_code(ctx, step: int, saved: dict | None, code: dict,
                say: Callable[[str], None]) -> None:
  """Refuses (ConfigError) a checkpoint written by other code, unless the context allows
  it (a line then says what changed); a checkpoint with no fingerprint gets a line."""
  if saved is None:
    say(f"the checkpoint at step {step} predates code fingerprints: resumed without "
        "checking that the code that wrote it is this one.")
    return
  changes = workdir_lib.code_changes(saved, code)
  if not changes:
    return
  listed = "; ".join(changes[:6]) + (f"; and {len(changes) - 6} more" if len(changes) > 6
                                     else "")
  if ctx.resume_across_code_change:
    say(f"resuming at step {step} across a code change ({listed}).")
    return
  raise ConfigError(
      f"{ctx.unit.label}: its checkpoint at step {step} was written by other code "
      f"({listed}), and a unit must not mix two codes' numbers. Resume with the code that "
      "wrote it (WORKDIR/launches/*.json name its commit), or run it afresh in another "
      "workdir; --resume_across_code_change resumes anyway, for a change that leaves the "
      "numbers alone.")


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


class Clock:
  """The ETA of the work left at the rate measured since `start(done)` (called after the
  work that should not set the pace, such as a compiling first call)."""

  def __init__(self, total: float, now: Callable[[], float] | None = None):
    self.total, self._t0, self._w0 = float(total), None, 0.0
    self._now = now or time.perf_counter

  def start(self, done: float) -> None:
    self._t0, self._w0 = self._now(), float(done)

  def eta(self, done: float) -> str:
    """', ETA 3m05s', or '' before a rate is known or when nothing is left."""
    if self._t0 is None or done <= self._w0 or done >= self.total:
      return ""
    rate = (self._now() - self._t0) / (done - self._w0)
    return f", ETA {format_seconds(rate * (self.total - done))}"


def format_seconds(seconds: float) -> str:
  """'7s', '3m05s', '2h01m00s'."""
  h, rem = divmod(int(round(seconds)), 3600)
  m, s = divmod(rem, 60)
  return f"{h}h{m:02d}m{s:02d}s" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def median(values) -> float:
  """The NaN-safe median of a replicate array (for progress lines)."""
  return float(np.nanmedian(np.asarray(values, np.float64)))


def nonfinite_note(values, what: str = "loss") -> str:
  """'; K of N replicates have a nan/inf <what>', or '' when all are finite."""
  bad = int(np.sum(~np.isfinite(np.asarray(values, np.float64))))
  return f"; {bad} of {np.size(values)} replicates have a nan/inf {what}" if bad else ""
