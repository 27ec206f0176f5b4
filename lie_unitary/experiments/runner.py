"""The one runner of both experiment families: validate, record the launch, run each unit once.

`train_and_evaluate(family, config, workdir)` is the whole life of a launch:

1. the family validates every config field before the workdir is touched
   (`ConfigError` names the field and what it may be);
2. the config, provenance and units are written to WORKDIR/launches/NNNN-<time>.json;
3. each unit not yet finished (WORKDIR/finished.jsonl lists its id at its target step)
   is claimed (`workdir.claim`: no two processes, launches or hosts compute one unit at
   once) and run by the family's ``run_unit(config, unit, ctx)``, which resumes from the
   unit's checkpoint and writes records as it goes (`UnitContext.write`);
4. the first SIGINT/SIGTERM stops at the next checkpoint; the same command resumes.

A family is a module with ``NAME``, ``validate_config(config)``, ``units(config) ->
list[Unit]``, ``run_unit(config, unit, ctx)`` and ``write_report(workdir) -> list[str]``.
Units run in this process (over all its devices), or SPMD over several processes or
hosts after ``jax.distributed.initialize()``; separate launches on one workdir share
its units through the claims.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.util
import json
import os
import time
from typing import Any
from typing import Callable
from typing import Sequence

import jax

from lie_unitary.experiments import loop
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.fields import ConfigError
from lie_unitary.experiments.fields import Unit

__all__ = ["ConfigError", "FAMILIES", "RunSummary", "UnitContext", "get_family", "run_units",
           "train_and_evaluate"]

FAMILIES = {"operators": "lie_unitary.experiments.operators.experiment",
            "rnn": "lie_unitary.experiments.rnn.experiment"}


def get_family(name: str):
  """The family module `name` ('operators' or 'rnn').

  Raises:
    ValueError: another name.
  """
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
    stop: set by the first SIGINT/SIGTERM (`loop.Loop` honours it).
    tensorboard: also write TensorBoard events under WORKDIR/tensorboard/<unit>.
  """
  workdir: str
  unit: Unit
  printer: Callable[[str], None]
  stop: loop.StopRequest
  tensorboard: bool = False
  _writer: Any = dataclasses.field(default=None, repr=False)

  def write(self, recs: Sequence[dict], file: str = workdir_lib.RESULTS) -> None:
    """Appends records, each with the unit's id, name and fields (process 0 only)."""
    if jax.process_index() == 0 and recs:
      base = {"unit": self.unit.id, "unit_name": self.unit.name, **self.unit.fields}
      workdir_lib.append_records(workdir_lib.path(self.workdir, file),
                                 [{**base, **r} for r in recs])

  def written(self) -> set[tuple]:
    """{(kind, replicate, step)} of the unit's records already in results.jsonl (a
    resumed unit does not write them twice)."""
    return {(r.get("kind"), r.get("replicate"), r.get("step"))
            for r in workdir_lib.read(self.workdir) if r.get("unit") == self.unit.id}

  def scalars(self, step: int, values: dict) -> None:
    """TensorBoard scalars, when enabled (process 0). CLU's writers would need
    TensorFlow for the event files; tensorboardX writes them alone."""
    if not self.tensorboard or jax.process_index() != 0:
      return
    if self._writer is None:
      from tensorboardX import SummaryWriter
      self._writer = SummaryWriter(os.path.join(self.workdir, "tensorboard", self.unit.slug))
    for name, value in values.items():
      self._writer.add_scalar(str(name), float(value), global_step=int(step))
    self._writer.flush()

  def close(self) -> None:
    if self._writer is not None:
      self._writer.close()
      self._writer = None


@dataclasses.dataclass
class RunSummary:
  """What a launch did: units computed here, skipped (done, or another process's), and
  whether it stopped early."""
  computed: int = 0
  skipped: int = 0
  interrupted: bool = False


def _claim(workdir: str, unit: Unit):
  """`workdir.claim` in this process; over several jax processes process 0 claims and
  every process follows its answer (they compute the unit together)."""
  if jax.process_count() == 1:
    return workdir_lib.claim(workdir, unit.slug)

  @contextlib.contextmanager
  def spmd():
    from jax.experimental import multihost_utils
    with (workdir_lib.claim(workdir, unit.slug) if jax.process_index() == 0
          else contextlib.nullcontext(True)) as mine:
      yield bool(multihost_utils.broadcast_one_to_all(bool(mine)))
  return spmd()


def run_units(family, config, units: Sequence[Unit], workdir: str, *,
              printer: Callable[[str], None] = print, stop: loop.StopRequest | None = None,
              tensorboard: bool = False) -> RunSummary:
  """Runs every unit not yet finished, in order, each claimed first.

  Args:
    family: the experiment family (module).
    config: its validated config.
    units: the units, in the order to run them.
    workdir: the run's folder.
    printer: progress lines.
    stop: a stop request to honour (default: a fresh one).
    tensorboard: also write TensorBoard events.
  """
  stop = stop or loop.StopRequest()
  clock = loop.Clock(sum(u.cost for u in units))
  clock.start(0.0)
  summary, done_cost, start = RunSummary(), 0.0, time.perf_counter()
  for i, unit in enumerate(units):
    label = f"[{i + 1}/{len(units)}] {unit.name}"
    with _claim(workdir, unit) as mine:
      # Finished (perhaps while we waited for the claim), or being computed elsewhere.
      done = (unit.id, unit.target_step) in workdir_lib.finished_units(workdir)
      if done or not mine:
        printer(f"{label}: {'already done' if done else 'running in another process'}, "
                "skipped")
        summary.skipped += 1
        clock.total -= unit.cost  # skipped units do not set the pace
        continue
      ctx = UnitContext(workdir, unit, printer, stop, tensorboard)
      t0 = time.perf_counter()
      try:
        family.run_unit(config, unit, ctx)
      except loop.Interrupted:
        printer(f"{unit.name}: stopped at a checkpoint ({stop.signal_name}); rerun the same "
                "command to resume.")
        summary.interrupted = True
        return summary
      finally:
        ctx.close()
      if jax.process_index() == 0:
        workdir_lib.mark_finished(workdir, unit, time.perf_counter() - t0)
    summary.computed += 1
    done_cost += unit.cost
    printer(f"{label}: {time.perf_counter() - t0:.1f}s (elapsed "
            f"{loop.format_seconds(time.perf_counter() - start)}{clock.eta(done_cost)})")
    if stop.requested() and i + 1 < len(units):
      printer(f"stopped ({stop.signal_name}) after {unit.name}: {len(units) - i - 1} unit(s) "
              "not started; rerun the same command to resume.")
      summary.interrupted = True
      return summary
  return summary


def config_to_json(config) -> dict:
  """A ConfigDict (or dict) as a JSON-able dict."""
  if hasattr(config, "to_json"):
    return json.loads(config.to_json())
  return json.loads(json.dumps(dict(config), default=str))


def train_and_evaluate(family, config, workdir: str, *,
                       printer: Callable[[str], None] = print, tensorboard: bool = False,
                       handle_signals: bool = True) -> RunSummary:
  """Validates the config, records the launch, and runs (or resumes) every unit.

  Args:
    family: a family module or its name ('operators', 'rnn').
    config: the family's ConfigDict.
    workdir: output folder (created after validation).
    printer: progress lines.
    tensorboard: also write TensorBoard events (needs tensorboardX).
    handle_signals: the first SIGINT/SIGTERM stops at a checkpoint (main thread).

  Returns:
    A `RunSummary`.

  Raises:
    ConfigError: a bad config field (or `tensorboard` without tensorboardX), before
      anything is written.
  """
  family = get_family(family) if isinstance(family, str) else family
  family.validate_config(config)
  units = family.units(config)
  names = [u.name for u in units]
  if len(set(names)) < len(names):
    raise ConfigError(f"the config lists the same unit twice: "
                      f"{sorted({n for n in names if names.count(n) > 1})}.")
  if tensorboard and importlib.util.find_spec("tensorboardX") is None:
    raise ConfigError("--tensorboard needs tensorboardX: pip install lie_unitary[tensorboard]")
  os.makedirs(workdir, exist_ok=True)
  if jax.process_index() == 0:
    workdir_lib.write_launch(workdir, family.NAME, config_to_json(config), units)
  stop = loop.StopRequest()
  guard = loop.handle_signals(stop, printer) if handle_signals else contextlib.nullcontext()
  with guard:
    printer(f"{len(units)} unit(s) on {jax.device_count()} device(s), "
            f"{jax.process_count()} process(es) → {workdir}")
    return run_units(family, config, units, workdir, printer=printer, stop=stop,
                     tensorboard=tensorboard)
