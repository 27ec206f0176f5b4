"""One unit's training, read top to bottom (`train_unit`): restore, then per call train,
evaluate, record and checkpoint (without the sharding's padding: any device count resumes
it), with a progress line and ETA; a first SIGINT/SIGTERM (`handle_signals`) stops it."""

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


class Task(NamedTuple):
  """A family's unit: pure functions of the state (a pytree, leading axis the padded
  replicates, sharded) and the history (JSON-able), both checkpointed. `evaluate` runs at
  the validation points: 0, `target`, multiples of `every` and of `epoch_steps` (> 0: the
  line shows the epoch). A call lasts about `call_seconds` (None: to the next validation
  point); `target_field` names the target in messages."""
  init: Callable[[], tuple[Any, dict]]
  train: Callable[[Any, dict, int, int], tuple[Any, dict]]
  evaluate: Callable[[Any, dict, int], tuple[list[dict], dict, str]]
  finish: Callable[[Any, dict], dict[str, list[dict]]]
  target: int
  every: int = 0
  epoch_steps: int = 0
  call_seconds: float | None = 10.0
  target_field: str = "the target"


def train_unit(task: Task, ctx, replicas, *, clock: Callable[[], float] = time.perf_counter,
               checkpoint_seconds: float = 60.0, progress_seconds: float = 15.0) -> None:
  """Trains `ctx.unit` (its `replicas.Replicas`) to `task.target` from its checkpoint,
  writing each record once with the unit's ``seconds``; `clock`: a test's own.

  Raises:
    Interrupted: after a checkpoint, when `ctx.stop` was requested.
    ConfigError: a checkpoint beyond the target or of other code, records without one.
  """
  now, say = clock, lambda text: ctx.printer(f"{ctx.unit.label}: {text}")
  progress = _Progress(task, now)
  code = workdir_lib.code_fingerprint()  # saved with each checkpoint, checked on resume
  folder = workdir_lib.path(ctx.workdir, "checkpoints", ctx.unit.slug)
  ticker = workdir_lib.periodically(progress_seconds, lambda: say(progress.line()))
  with contextlib.closing(checkpoints(folder)) as manager, ticker:  # compiling too
    state, history = task.init()
    step, elapsed, owed, meta = 0, 0.0, True, None  # owed: the evaluation at `step` is to run
    for at in sorted(manager.all_steps(), reverse=True):
      try:
        host, meta = restore_checkpoint(manager, at, replicas.gather(state))
      except Exception as e:  # noqa: BLE001 (orbax raises many kinds for damaged files)
        aside = os.path.join(manager.directory, f"damaged-{at}-{int(time.time())}")
        os.rename(os.path.join(manager.directory, str(at)), aside)
        manager.reload()
        say(f"the checkpoint at step {at} could not be read ({type(e).__name__}: "
            f"{' '.join(str(e).split())[:160]}); moved to {aside}, "
            f"{'the previous one is used' if manager.all_steps() else 'restarting'}.")
        continue
      saved = meta.get("code")  # refused if of other code, unless the context allows it
      changes = [] if saved is None else workdir_lib.code_changes(saved, code)
      listed = "; ".join(changes[:6]) + f"; and {len(changes) - 6} more" * (len(changes) > 6)
      if saved is None:
        say(f"the checkpoint at step {at} predates code fingerprints: resumed unchecked.")
      elif changes and ctx.resume_across_code_change:
        say(f"resuming at step {at} across a code change ({listed}).")
      elif changes:
        raise ConfigError(
            f"{ctx.unit.label}: its checkpoint at step {at} was written by other code "
            f"({listed}): resume with that code (WORKDIR/launches/*.json name its commit), "
            "afresh in another workdir, or with --resume_across_code_change for a change "
            "that leaves the numbers alone.")
      if meta["step"] > task.target:
        raise ConfigError(
            f"{ctx.unit.label}: its checkpoint is at step {meta['step']}, beyond "
            f"{task.target_field} = {task.target}; ask for at least {meta['step']} (its "
            f"records up to {task.target} are in the workdir).")
      say(f"resumed at step {meta['step']} ({format_seconds(meta['elapsed'])} so far)")
      state = replicas.from_host(host, state)
      history, step, elapsed = dict(meta.get("history", {})), meta["step"], meta["elapsed"]
      owed = meta.get("owed")  # None: a checkpoint older than "owed"
      break
    else:  # no readable checkpoint
      count = workdir_lib.unit_records(ctx.workdir, ctx.unit.id)
      if count:  # its checkpoint lost: no unit's records may mix two starts
        records = f"{count} record{'s' * (count > 1)}"
        if not ctx.restart_lost_units:
          raise ConfigError(
              f"unit {ctx.unit.label} ({ctx.unit.id}) has {records} but no checkpoint: rerun "
              "with --restart_lost_units to start it again from step 0, replacing its records.")
        if jax.process_index() == 0:
          workdir_lib.remove_unit_records(ctx.workdir, ctx.unit.id)
        say(f"no checkpoint: its {records} removed, starting again from step 0.")
    key = lambda r: (r.get("kind"), r.get("replicate"), r.get("step"))  # written once
    written = {key(r) for r in workdir_lib.read(ctx.workdir) if r.get("unit") == ctx.unit.id}
    if owed is None:
      owed = validation_point(task, step) and not any(s == step for _, _, s in written)
    progress.step, start = step, now()
    seconds = lambda: elapsed + now() - start  # the unit's, across resumes

    def checkpoint(owed: bool) -> None:
      nonlocal last_save
      progress.doing("checkpointing")
      save_checkpoint(manager, step, replicas.gather(state), {
          "step": step, "elapsed": seconds(), "history": workdir_lib.to_jsonable(history),
          "code": code, "owed": owed})
      last_save = now()

    def write(records, file=workdir_lib.RESULTS) -> None:
      if file == workdir_lib.RESULTS:
        records = [{**r, "seconds": round(seconds(), 3)} for r in records if key(r) not in written]
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
        progress.paced = (now(), step + num)  # the compiling call does not set the pace
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
    if manager.latest_step() != step:  # the trained state, for `workdir.load_unit`
      checkpoint(False)
    progress.doing("finishing")
    for file, records in task.finish(state, history).items():
      write(records, file)


def validation_point(task: Task, step: int) -> bool:
  """Whether `step` is 0, the target, a multiple of `task.every` or an epoch's end."""
  return step in (0, task.target) or any(p and step % p == 0
                                         for p in (task.every, task.epoch_steps))


def call_length(task: Task, step: int, seconds_per_step: float | None) -> int:
  """The steps of the call from `step` (1 while the rate is unknown: it compiles)."""
  end = min([task.target] + [(step // p + 1) * p for p in (task.every, task.epoch_steps) if p])
  if task.call_seconds is None:
    return end - step
  if seconds_per_step is None:
    return 1
  return min(end - step, max(1, int(task.call_seconds / seconds_per_step)))


class _Progress:
  """The progress line (`line`), updated by `train_unit`: `rate` (seconds per step), `call`
  (first step, steps, start time) in flight, `paced` (time, step) the ETA counts from."""

  def __init__(self, task: Task, now: Callable[[], float]):
    self.task, self.now, self.step, self.rate, self.shown = task, now, 0, None, ""
    self.call = self.paced = None
    self.doing("initialising")

  def doing(self, activity: str) -> None:
    self.activity, self.since = activity, self.now()

  def line(self) -> str:
    """The step (≈ within a call), epoch, what runs and since when, metrics and ETA."""
    step, now, approx, call = self.step, self.now(), "", self.call
    if call is not None and self.activity == "training" and self.rate:
      step, approx = call[0] + min(call[1], int((now - call[2]) / self.rate)), "≈"
    epoch = f" (epoch {step / self.task.epoch_steps:.2f})" if self.task.epoch_steps else ""
    since = "" if self.activity == "training" else f" for {format_seconds(now - self.since)}"
    shown = f"; {self.shown}" if self.shown else ""
    left = eta(now - self.paced[0], step - self.paced[1],
               self.task.target - self.paced[1]) if self.paced else ""
    return f"step {approx}{step}/{self.task.target}{epoch}, {self.activity}{since}{shown}{left}"


def checkpoints(directory: str):
  """The orbax CheckpointManager of a unit's folder: synchronous, the two latest kept."""
  import orbax.checkpoint as ocp
  return ocp.CheckpointManager(os.path.abspath(directory), options=ocp.CheckpointManagerOptions(
      max_to_keep=2, create=True, enable_async_checkpointing=False))


def save_checkpoint(manager, step: int, state: Any, meta: dict) -> None:
  """Saves a pytree of arrays and JSON `meta` at `step`, on disk on return."""
  from orbax.checkpoint import args
  manager.save(step, args=args.Composite(state=args.StandardSave(state),
                                         meta=args.JsonSave(meta)), force=True)
  manager.wait_until_finished()


def restore_checkpoint(manager, step: int, like: Any = None) -> tuple[Any, dict]:
  """(state as numpy, shaped like `like` or as saved; metadata) at `step`."""
  from orbax.checkpoint import args
  like = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype), like)  # None: None
  out = manager.restore(step, args=args.Composite(state=args.StandardRestore(like),
                                                  meta=args.JsonRestore()))
  return jax.tree.map(np.asarray, out["state"]), dict(out["meta"])


class Interrupted(Exception):
  """Raised by a loop that stopped on request, after checkpointing."""


class StopRequest(threading.Event):
  """Set by the first SIGINT/SIGTERM or by `request(why)`; `signal_name` says which."""
  signal_name = ""
  requested = threading.Event.is_set

  def request(self, why: str = "requested") -> None:
    self.signal_name = why
    self.set()


@contextlib.contextmanager
def handle_signals(stop: StopRequest, printer: Callable[[str], None] = print) -> Iterator[None]:
  """In the block (main thread only), a first SIGINT/SIGTERM sets `stop`; a second aborts."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  def handler(signum, frame):
    if stop.requested():  # the previous handlers are restored on the way out
      if signum == signal.SIGINT:
        raise KeyboardInterrupt
      raise SystemExit(128 + signum)
    stop.request(signal.Signals(signum).name)
    printer(f"{stop.signal_name}: stopping after the current call (checkpointed); send it "
            "again to abort now.")

  previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
  try:
    yield
  finally:
    for s, h in previous.items():
      signal.signal(s, h)


def eta(seconds: float, done: float, total: float) -> str:
  """', ETA 3m05s' for the work left at the rate of `done` in `seconds` ('' if none)."""
  return f", ETA {format_seconds(seconds / done * (total - done))}" if 0 < done < total else ""


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
