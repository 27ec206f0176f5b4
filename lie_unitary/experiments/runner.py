"""The one runner of every experiment family: `train_and_evaluate` validates the config
before the workdir is touched, records the launch, then runs each unit not yet finished,
claimed first (no two processes compute one unit), by the family's ``run_unit``."""

import contextlib
import dataclasses
import importlib
import os
import time
from typing import Callable
from typing import Protocol
from typing import runtime_checkable

import jax

from lie_unitary.experiments import loop
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.fields import ConfigError
from lie_unitary.experiments.fields import Unit

FAMILIES = {"basis": "lie_unitary.experiments.basis.experiment",
            "operators": "lie_unitary.experiments.operators.experiment",
            "rnn": "lie_unitary.experiments.rnn.experiment"}


@runtime_checkable
class Family(Protocol):
  """What the runner calls of an experiment family (a module: operators, rnn, basis)."""

  NAME: str

  def validate_config(self, config) -> None:
    """Raises ConfigError naming the first bad field, before anything is written."""

  def units(self, config) -> list[Unit]:
    """The units of a validated config, in the order to run them."""

  def make_task(self, config, unit: Unit, replicas) -> loop.Task:
    """A trained unit's training as pure functions, for `loop.train_unit`."""

  def run_unit(self, config, unit: Unit, ctx: "UnitContext") -> None:
    """Trains one unit by `loop.train_unit` (loop.Interrupted on a stop), records by `ctx`."""

  def write_report(self, workdir: str) -> list[str]:
    """Writes WORKDIR's report; returns the paths written."""


def get_family(name: str) -> Family:
  """The family module `name` (a key of `FAMILIES`); ValueError for another name."""
  if name not in FAMILIES:
    raise ValueError(f"unknown experiment family {name!r}; expected one of {sorted(FAMILIES)}.")
  return importlib.import_module(FAMILIES[name])


@dataclasses.dataclass
class UnitContext:
  """What a running unit sees of the runner: its workdir, the unit, where progress lines go,
  the stop request of the first SIGINT/SIGTERM, the run's permissions (`train_and_evaluate`)."""
  workdir: str
  unit: Unit
  printer: Callable[[str], None]
  stop: loop.StopRequest
  resume_across_code_change: bool = False
  restart_lost_units: bool = False

  def write(self, recs: list[dict], file: str = workdir_lib.RESULTS) -> None:
    """Appends records with the unit's id, name and fields (process 0), but those the file has."""
    if jax.process_index() == 0 and recs:
      base = {"unit": self.unit.id, "unit_name": self.unit.name, **self.unit.fields}
      workdir_lib.append_records(workdir_lib.path(self.workdir, file),
                                 [{**base, **r} for r in recs], key=workdir_lib.record_key)


@dataclasses.dataclass
class RunSummary:
  """Units computed here, skipped (done, or another process's: `elsewhere`), and what
  stopped the run early (`stopped_by`: "SIGINT", "SIGTERM", a caller's reason; "" if none)."""
  computed: int = 0
  skipped: int = 0
  elsewhere: int = 0
  stopped_by: str = ""


def train_and_evaluate(family: Family | str, config, workdir: str, *,
                       printer: Callable[[str], None] = print,
                       stop: loop.StopRequest | None = None, handle_signals: bool = True,
                       resume_across_code_change: bool = False,
                       restart_lost_units: bool = False) -> RunSummary:
  """Validates `config` (the family's ConfigDict), records the launch in `workdir` (created
  after validation), and runs or resumes every unit; returns a `RunSummary`.

  Args:
    family: a family module or its name (a key of `FAMILIES`).
    printer: where progress lines go.
    stop: a stop request to honour too (default: a new one).
    handle_signals: the first SIGINT/SIGTERM stops at a checkpoint (main thread only).
    resume_across_code_change: resume a checkpoint written by other code.
    restart_lost_units: restart from step 0, replacing its records, an unfinished unit
      with records but no checkpoint.

  Raises:
    ConfigError: a bad config field, before anything is written; a unit refused when it
      comes (a checkpoint of other code, or records without a checkpoint).
  """
  family = get_family(family) if isinstance(family, str) else family
  family.validate_config(config)
  units = family.units(config)
  twice = sorted({u.label for u in units if [v.id for v in units].count(u.id) > 1})
  if twice:
    raise ConfigError(f"the config lists the same unit twice: {twice}.")
  others = sorted({x["family"] for x in workdir_lib.read_launches(workdir or os.devnull)}
                  - {family.NAME})
  if not workdir or os.path.isfile(workdir) or others:  # a report of two families fails
    what = f"launches of {others}" if others else "not a folder"
    raise ConfigError(f"workdir {workdir!r}: {what}; give a {family.NAME} workdir.")
  os.makedirs(workdir, exist_ok=True)
  if jax.process_index() == 0:
    workdir_lib.write_launch(workdir, family.NAME, config, units)
  stop, summary = stop or loop.StopRequest(), RunSummary()
  total, done_cost, start = sum(u.cost for u in units), 0.0, time.perf_counter()
  with loop.handle_signals(stop, printer) if handle_signals else contextlib.nullcontext():
    printer(f"{len(units)} unit(s) on {jax.device_count()} device(s), "
            f"{jax.process_count()} process(es) → {workdir}")
    for i, unit in enumerate(units):
      label = f"[{i + 1}/{len(units)}] {unit.label}"
      claim = (workdir_lib.claim(workdir, unit.slug) if jax.process_index() == 0
               else contextlib.nullcontext())  # every process follows process 0's
      with claim as holder:
        if jax.process_count() > 1:
          from jax.experimental import multihost_utils
          if not multihost_utils.broadcast_one_to_all(holder is None):
            holder = holder or "another process"
        # Finished (perhaps by another process before the claim), or computed elsewhere.
        done = (unit.id, unit.target_step) in workdir_lib.finished_units(workdir)
        if done or holder:
          printer(f"{label}: {'already done' if done else f'running in {holder}'}, skipped")
          summary.skipped += 1
          summary.elsewhere += not done
          total -= unit.cost  # skipped units do not set the pace
          continue
        t0 = time.perf_counter()
        try:
          family.run_unit(config, unit, UnitContext(workdir, unit, printer, stop,
                                                    resume_across_code_change,
                                                    restart_lost_units))
        except loop.Interrupted:
          printer(f"{unit.label}: stopped at a checkpoint ({stop.signal_name}); rerun the "
                  "same command to resume.")
          summary.stopped_by = stop.signal_name or "requested"
          return summary
        if jax.process_index() == 0:
          workdir_lib.mark_finished(workdir, unit, time.perf_counter() - t0)
      summary.computed += 1
      done_cost += unit.cost
      elapsed = time.perf_counter() - start
      printer(f"{label}: {time.perf_counter() - t0:.1f}s (elapsed "
              f"{loop.format_seconds(elapsed)}{loop.eta(elapsed, done_cost, total)})")
      if stop.requested() and i + 1 < len(units):
        printer(f"stopped ({stop.signal_name}) after {unit.label}: {len(units) - i - 1} "
                "unit(s) not started; rerun the same command to resume.")
        summary.stopped_by = stop.signal_name or "requested"
        return summary
  return summary
