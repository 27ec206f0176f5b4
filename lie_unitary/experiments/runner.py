"""The one runner of both experiment families: validate, record the launch, resume.

`train_and_evaluate(family, config, workdir)` is the whole life of a launch:

1. the family validates every config field, before the workdir is touched
   (`ConfigError` names the field and the valid choices);
2. the config, provenance and the launch's units are written to
   ``WORKDIR/launches/NNNN-<time>.json`` (never overwritten);
3. every unit not finished before runs, in this process or in worker processes
   that share them (``num_workers``), or SPMD over several hosts after
   ``jax.distributed.initialize()``; a unit is finished when
   ``WORKDIR/finished.jsonl`` lists its id (a hash of every field that changes its
   computation, `lie_unitary.experiments.units`) at its target step, so a rerun
   with changed fields computes new units beside the old ones;
4. a unit writes records as it goes (`UnitContext.write`) and checkpoints its
   training state (`UnitContext.checkpointer`), so a crash loses at most one chunk;
   the first SIGINT/SIGTERM ends the current chunk, checkpoints and returns.

A family is a module with ``NAME``, ``validate_config(config)``,
``units(config) -> list[Unit]``, ``run_unit(config, unit, ctx)`` and
``write_report(workdir) -> list[str]`` (`Family`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import json
import multiprocessing
import os
import shutil
import signal
import tempfile
import time
from typing import Any
from typing import Callable
from typing import Protocol
from typing import Sequence

import jax

from lie_unitary.experiments import checkpoints
from lie_unitary.experiments import interrupts
from lie_unitary.experiments import metric_writer
from lie_unitary.experiments import provenance
from lie_unitary.experiments import records
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.fields import ConfigError
from lie_unitary.experiments.units import Unit

__all__ = ["ConfigError", "FAMILIES", "Family", "RunSummary", "UnitContext", "get_family",
           "holds_results", "run_units", "train_and_evaluate"]

FAMILIES = {"operators": "lie_unitary.experiments.operators.experiment",
            "rnn": "lie_unitary.experiments.rnn.experiment"}


class Family(Protocol):
  """An experiment family (a module): operators (paper §3) or rnn (paper §4)."""
  NAME: str

  def validate_config(self, config) -> None: ...

  def units(self, config) -> list[Unit]: ...

  def run_unit(self, config, unit: Unit, ctx: "UnitContext") -> None: ...

  def write_report(self, workdir: str) -> list[str]: ...


def get_family(name: str) -> Family:
  """The family module `name` ('operators' or 'rnn'). Raises ValueError otherwise."""
  if name not in FAMILIES:
    raise ValueError(f"unknown experiment family {name!r}; expected one of {sorted(FAMILIES)}.")
  return importlib.import_module(FAMILIES[name])


@dataclasses.dataclass
class UnitContext:
  """What a running unit sees of the runner.

  Attributes:
    workdir: the run's folder.
    unit: the unit being computed.
    printer: where progress lines go.
    stop: set by the first SIGINT/SIGTERM: finish the chunk, checkpoint, raise
      `interrupts.Interrupted`.
    tensorboard: write TensorBoard events under WORKDIR/tensorboard/<unit> too.
  """
  workdir: str
  unit: Unit
  printer: Callable[[str], None]
  stop: interrupts.StopRequest
  tensorboard: bool = False
  _writer: Any = dataclasses.field(default=None, repr=False)

  def write(self, recs: Sequence[dict], file: str = workdir_lib.RESULTS) -> None:
    """Appends records (fsynced), each with the unit's id, name and fields; only
    process 0 writes."""
    if jax.process_index() != 0 or not recs:
      return
    base = {"unit": self.unit.id, "unit_name": self.unit.name, **self.unit.fields}
    records.append_records(workdir_lib.path(self.workdir, file),
                           [{**base, **r} for r in recs])

  def scalars(self, step: int, values: dict) -> None:
    """TensorBoard scalars under WORKDIR/tensorboard/<unit> when enabled (process 0)."""
    if not self.tensorboard or jax.process_index() != 0:
      return
    if self._writer is None:
      self._writer = metric_writer.make_writer(
          workdir_lib.tensorboard_dir(self.workdir, self.unit.slug))
    self._writer.scalars(int(step), {k: float(v) for k, v in values.items()})

  def close(self) -> None:
    if self._writer is not None:
      self._writer.close()
      self._writer = None

  def checkpointer(self) -> checkpoints.Checkpointer:
    """The unit's own checkpoint folder, WORKDIR/checkpoints/<unit id>."""
    return checkpoints.Checkpointer(workdir_lib.checkpoint_dir(self.workdir, self.unit.slug))

  def check_stop(self) -> None:
    """Raises `interrupts.Interrupted` if a stop was requested (call after a checkpoint)."""
    if self.stop.requested():
      raise interrupts.Interrupted(self.unit.name)


@dataclasses.dataclass
class RunSummary:
  """What a launch did: units computed here, skipped (done or taken), interrupted."""
  computed: int = 0
  skipped: int = 0
  interrupted: bool = False


def _check_units(units: Sequence[Unit]) -> None:
  names = [u.name for u in units]
  duplicates = sorted({n for n in names if names.count(n) > 1})
  if duplicates:
    raise ConfigError(f"the config lists the same unit twice: {duplicates}.")


def run_units(family: Family, config, units: Sequence[Unit], workdir: str, *,
              printer: Callable[[str], None] = print,
              claim: Callable[[str], bool] | None = None,
              stop: interrupts.StopRequest | None = None, parallel: int = 1,
              tensorboard: bool = False) -> RunSummary:
  """The resume loop: runs every unit not yet finished, in order.

  Args:
    family: the experiment family.
    config: its validated config.
    units: the units, in the order to run them.
    workdir: the run's folder.
    printer: progress lines.
    claim: in a worker process, ``claim(slug) -> bool`` says whether this worker
      takes an unfinished unit (False: another has it).
    stop: a stop request to honour between chunks (default: a fresh one).
    parallel: processes sharing the units (divides the ETA).
    tensorboard: also write TensorBoard events.

  Returns:
    A `RunSummary`.
  """
  stop = stop or interrupts.StopRequest()
  done = workdir_lib.finished_units(workdir)
  progress = records.Progress([u.cost for u in units], printer, parallel)
  summary = RunSummary()
  for i, unit in enumerate(units):
    if (unit.id, unit.target_step) in done:
      progress.skip(unit.name, unit.cost)
      summary.skipped += 1
      continue
    if claim is not None and not claim(unit.slug):
      progress.skip(unit.name, unit.cost, "taken by another worker")
      summary.skipped += 1
      continue
    ctx = UnitContext(workdir, unit, printer, stop, tensorboard)
    start = time.perf_counter()
    try:
      family.run_unit(config, unit, ctx)
    except interrupts.Interrupted:
      ctx.close()
      printer(f"{unit.name}: stopped at a checkpoint ({stop.signal_name}); rerun the same "
              "command to resume.")
      summary.interrupted = True
      return summary
    ctx.close()
    if jax.process_index() == 0:
      records.append_records(workdir_lib.path(workdir, workdir_lib.FINISHED), [{
          "unit": unit.id, "name": unit.name, "step": unit.target_step,
          "seconds": round(time.perf_counter() - start, 3)}])
    progress.finish(unit.name, unit.cost)
    summary.computed += 1
    if stop.requested() and i + 1 < len(units):
      printer(f"stopped ({stop.signal_name}) between units, after {unit.name}: "
              f"{len(units) - i - 1} unit(s) not started; rerun the same command to resume.")
      summary.interrupted = True
      return summary
  return summary


def config_to_json(config) -> dict:
  """A ConfigDict (or dict) as a JSON-able dict."""
  if hasattr(config, "to_json"):
    return json.loads(config.to_json())
  return json.loads(json.dumps(dict(config), default=str))


def train_and_evaluate(family: Family | str, config, workdir: str, *, num_workers: int = 1,
                       printer: Callable[[str], None] = print, tensorboard: bool = False,
                       handle_signals: bool = True) -> RunSummary:
  """Validates the config, records the launch, and runs (or resumes) every unit.

  Args:
    family: a family module or its name ('operators', 'rnn').
    config: the family's ConfigDict.
    workdir: output folder (created after validation).
    num_workers: worker processes sharing the units (CPU hosts; each keeps about one
      core busy). Started with multiprocessing's 'spawn' method, so this works from
      a notebook too. Not with several jax processes (multi-host runs are SPMD).
    printer: progress lines.
    tensorboard: also write TensorBoard events (needs the `tensorboard` extra).
    handle_signals: make the first SIGINT/SIGTERM a graceful stop (main thread only).

  Returns:
    A `RunSummary` (interrupted=True after a graceful stop).

  Raises:
    ConfigError: a bad config field, or `tensorboard` without tensorboardX, before
      anything is written.
    RuntimeError: a worker process failed (finished units stay recorded).
  """
  family = get_family(family) if isinstance(family, str) else family
  if not isinstance(num_workers, int) or num_workers < 1:
    raise ConfigError(f"num_workers must be a positive integer; got {num_workers!r}.")
  if num_workers > 1 and jax.process_count() > 1:
    raise ConfigError("num_workers > 1 cannot be combined with several jax processes "
                      "(jax.distributed): use one or the other.")
  family.validate_config(config)
  units = family.units(config)
  _check_units(units)
  if tensorboard:
    metric_writer.require_tensorboard()
  os.makedirs(workdir, exist_ok=True)
  if jax.process_index() == 0:
    provenance.write_launch(workdir, family.NAME, config_to_json(config), units)
  stop = interrupts.StopRequest()
  if num_workers > 1:
    return _run_workers(family.NAME, config, workdir, num_workers, units, printer, stop,
                        tensorboard, handle_signals)
  guard = interrupts.handle_signals(stop, printer) if handle_signals else contextlib.nullcontext()
  with guard:
    printer(f"{len(units)} unit(s) on {jax.device_count()} device(s), "
            f"{jax.process_count()} process(es) → {workdir}")
    return run_units(family, config, units, workdir, printer=printer, stop=stop,
                     tensorboard=tensorboard)


# Worker processes -----------------------------------------------------------------


def _claimer(directory: str) -> Callable[[str], bool]:
  def claim(slug: str) -> bool:
    try:
      os.close(os.open(os.path.join(directory, slug), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
      return False
    return True
  return claim


def _worker_main(family_name: str, config, workdir: str, claims: str, index: int,
                 count: int, tensorboard: bool) -> None:
  """Entry point of a spawned worker: runs the units it can claim, longest first."""
  family = get_family(family_name)
  prefix = f"[worker {index}/{count}] "
  printer = lambda line: print(prefix + line, flush=True)  # noqa: E731
  units = sorted(family.units(config), key=lambda u: u.cost, reverse=True)
  stop = interrupts.StopRequest()
  with interrupts.handle_signals(stop, printer):
    summary = run_units(family, config, units, workdir, printer=printer, claim=_claimer(claims),
                        stop=stop, parallel=count, tensorboard=tensorboard)
  if summary.interrupted:
    printer("stopped; finished units are recorded.")


def _run_workers(family_name, config, workdir, count, units, printer, stop, tensorboard,
                 handle_signals) -> RunSummary:
  context = multiprocessing.get_context("spawn")
  claims = tempfile.mkdtemp(prefix=".claims-", dir=workdir)
  printer(f"{len(units)} unit(s) shared by {count} worker processes → {workdir}")
  procs = [context.Process(target=_worker_main, name=f"worker-{i}",
                           args=(family_name, config, workdir, claims, i, count, tensorboard))
           for i in range(count)]
  try:
    for p in procs:
      p.start()
    guard = (interrupts.handle_signals(stop, printer) if handle_signals
             else contextlib.nullcontext())
    with guard:
      forwarded = False
      while any(p.is_alive() for p in procs):
        for p in procs:
          p.join(timeout=0.2)
        # Ctrl-C reaches the workers through the terminal's process group; a SIGTERM
        # sent to this process alone is passed on.
        if stop.requested() and stop.signal_name == "SIGTERM" and not forwarded:
          for p in procs:
            if p.is_alive():
              os.kill(p.pid, signal.SIGTERM)
          forwarded = True
  finally:
    for p in procs:
      if p.is_alive():
        p.terminate()
        p.join()
    shutil.rmtree(claims, ignore_errors=True)
  failed = [f"worker {i} (exit code {p.exitcode})" for i, p in enumerate(procs) if p.exitcode]
  if failed:
    raise RuntimeError(f"{', '.join(failed)} failed; finished units are recorded, rerun the "
                       "same command to resume.")
  finished = workdir_lib.finished_units(workdir)
  computed = sum((u.id, u.target_step) in finished for u in units)
  return RunSummary(computed=computed, skipped=len(units) - computed,
                    interrupted=stop.requested() or computed < len(units))



def holds_results(workdir: str, family_name: str) -> bool:
  """Whether `workdir` has a launch of `family_name` (for ``--report_only``)."""
  return any(launch.get("family") == family_name
             for launch in workdir_lib.read_launches(workdir))
