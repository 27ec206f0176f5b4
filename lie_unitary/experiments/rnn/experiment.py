"""The RNN family of the shared runner: adding and memory problems (paper §4).

One unit is one (model, T) of a config's task, trained for `num_replicates`
replicates at once: their parameters, optimizer states and data streams are stacked
on a leading axis (sharded over all devices, `sweep.replicate_sharding`) and every
step is one vmapped, jitted program (`rnn.trainer.make_experiment`). Training runs
through the shared loop (`lie_unitary.experiments.loop`) in chunks of `val_every`
updates; after each chunk the validation loss on a fixed subsample is written
(records of kind "val"), and at the end the full validation and test sets are
evaluated (kind "final").

Records (``WORKDIR/results.jsonl``; the vocabulary shared with operators):
``unit`` (the unit's id), ``unit_name``, ``kind`` ("val" or "final"), ``replicate``,
``step`` (updates made), the unit's fields (task, model, T, hidden_size,
learning_rate, ..., num_replicates: every setting that changes the unit's numbers)
and the metrics ``val_loss``, ``train_loss`` (mean over the chunk; val records after
step 0), ``test_loss`` (final) and ``seconds`` (training time so far). Val records of
models with λ (guRNN) also hold the spectrum diagnostics of λ's chart
(`lie_unitary.principal_branch.spectrum_stats`): ``theta_spread`` (max − min of
θ = eigvalsh(iL(λ))), ``theta_max_abs``, ``min_sinc`` (the smallest |sinc(Δ/2)| over
eigenvalue gaps Δ: the weakest direction's gain in the derivative of expm) and
``wide_share`` (share of gaps beyond π).
"""

from __future__ import annotations

import sys
import time

import jax
import ml_collections

from lie_unitary.experiments import fields as F
from lie_unitary.experiments import loop
from lie_unitary.experiments import runner
from lie_unitary.experiments import sweep
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import config as config_lib
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import report
from lie_unitary.experiments.rnn import trainer
from lie_unitary.experiments.units import Unit

__all__ = ["NAME", "run_unit", "train_and_evaluate", "unit_spec", "units", "validate_config",
           "write_report"]

NAME = "rnn"

# Relative cost per step and state unit² (matmul widths: LSTM 4 gates, the complex
# pair 2n) to start the longest units first when worker processes share them.
_COST = {"lstm": 8, "gurnn": 4, "gurnn_beta": 4, "free": 4, "urnn": 4, "irnn": 1, "tanh": 1}


# Validation -------------------------------------------------------------------------


def _validate_models(config) -> None:
  """The per-model table: the models of `paper_models`, each with its own fields."""
  paper = config_lib.paper_models(config.task)
  table = config.models
  if not isinstance(table, (ml_collections.ConfigDict, dict)):
    F.fail("models", table, "a table like `paper_models(task)`'s")
  for m in table.keys():
    if m not in paper:
      raise F.ConfigError(f"config has no field 'models.{m}'; the models are "
                          f"{sorted(paper.keys())}.")
  for m, default in paper.items():
    if m not in table:
      raise F.ConfigError(f"config field 'models.{m}' is missing.")
    F.validate(table[m], {k: config_lib.MODEL_FIELDS[k] for k in default.keys()},
               prefix=f"models.{m}.")


def validate_config(config) -> None:
  """Checks every field before anything runs or is written.

  Raises:
    runner.ConfigError: naming the first unknown, missing or bad field and what it
      may be.
  """
  F.validate(config, config_lib.FIELDS)
  _validate_models(config)
  if data.get_task(config.task).name == "adding" and min(config.T) < 2:
    F.fail("T", config.T, "integers ≥ 2 for the adding problem")
  if 0 < config.num_train < config.batch_size:
    F.fail("num_train", config.num_train, f"0 (fresh data) or ≥ batch_size = "
           f"{config.batch_size}")
  for field in ("val_size", "eval_size"):
    if config[field] % config.eval_batch_size:
      F.fail(field, config[field], f"a multiple of eval_batch_size = {config.eval_batch_size}")
  if config.batch_size % config.data_parallel:
    F.fail("data_parallel", config.data_parallel,
           f"a divisor of batch_size = {config.batch_size}")
  if jax.device_count() % config.data_parallel:
    F.fail("data_parallel", config.data_parallel,
           f"a divisor of the device count, {jax.device_count()} (several processes: "
           "--num_processes; one CPU process: "
           "XLA_FLAGS=--xla_force_host_platform_device_count=N)")


# Units ------------------------------------------------------------------------------


def unit_spec(config, model: str, T: int) -> ml_collections.FrozenConfigDict:
  """Every setting of one (model, T): the task, the fields of `config.FIELDS` whose
  identity rule holds for the model, and the model's entry of the per-model table.
  Frozen and hashable (it keys the cache of compiled programs); a unit's fields are
  exactly these."""
  spec = {"task": data.get_task(config.task).name, "model": model, "T": int(T),
          **F.identity(config, config_lib.FIELDS, model)}
  if "data_parallel" in spec:
    spec["data_parallel"] = int(spec["data_parallel"])
  spec.update(config.models[model].to_dict())
  return ml_collections.FrozenConfigDict(spec)


def _unit_name(spec) -> str:
  return f"{spec.task} T={spec.T} {spec.model}"


def units(config) -> list[Unit]:
  """One unit per (model, T) of a validated config, T-major."""
  out = []
  for T in config.T:
    for model in config.model:
      spec = unit_spec(config, model, T)
      fields = {k: (list(v) if isinstance(v, tuple) else v) for k, v in spec.items()}
      cost = (config.num_updates * spec.T * spec.num_replicates * spec.hidden_size ** 2
              * _COST[model])
      out.append(Unit(name=_unit_name(spec), fields=fields, target_step=config.num_updates,
                      cost=float(cost), spec=spec))
  return out


# Running ----------------------------------------------------------------------------


def run_unit(config, unit: Unit, ctx: runner.UnitContext) -> None:
  """Trains one unit (all replicates) to `unit.target_step` through the shared loop,
  resuming from its checkpoint; writes val records per chunk and final records.

  Raises:
    interrupts.Interrupted: after a checkpoint, when a stop was requested.
    runner.ConfigError: when the unit's checkpoint is beyond its target step.
  """
  del config  # everything is in unit.spec
  spec = unit.spec
  num = spec.num_replicates
  replicas = sweep.Replicas(num, sweep.replicate_sharding(
      data_parallel=spec.get("data_parallel", 1)))
  exp = trainer.make_experiment(spec, replicas.sharding)
  # Records already written (after the last checkpoint, before a crash) are not repeated.
  done = {(r.get("kind"), r.get("replicate"), r.get("step"))
          for r in workdir_lib.read(ctx.workdir) if r.get("unit") == unit.id}
  baseline = data.get_task(spec.task).baseline(spec.T)
  last_val = {}

  def val_metrics(state, **losses):
    """Losses, and for λ models the spectrum diagnostics of the current λ."""
    out = dict(losses)
    if exp.spectrum is not None:
      out.update(replicas.gather(exp.spectrum(state.params)))
    return out

  def write(kind, step, elapsed, metrics):
    ctx.write([{"kind": kind, "replicate": r, "step": step, "seconds": round(elapsed, 3),
                **{k: float(v[r]) for k, v in metrics.items()}}
               for r in range(num) if (kind, r, step) not in done])
    ctx.scalars(step, {f"{kind}/{k}/replicate_{r}": v[r] for k, v in metrics.items()
                       for r in range(num)})

  def evaluate(state, which, size):
    return replicas.gather(exp.evaluate(state.params, which, size))

  def init():
    state = exp.init(replicas.ids)
    if ("val", 0, 0) not in done:  # not on resume: the step-0 records exist then
      write("val", 0, 0.0, val_metrics(state, val_loss=evaluate(state, "val", spec.val_size)))
    return state, {}

  def after_call(state, step, train_loss, history, elapsed):
    last_val["val"] = val = evaluate(state, "val", spec.val_size)
    write("val", step, elapsed, val_metrics(state, val_loss=val,
                                            train_loss=replicas.gather(train_loss)))

  def status(step, train_loss):
    val = last_val["val"]
    return (f"val loss median {loop.median(val):.4g} (replicates "
            f"{', '.join(f'{v:.3g}' for v in val)}; baseline {baseline:.4g})")

  chunks = loop.Chunks(
      init=init, advance=lambda state, _, step, n: exp.train_chunk(state, replicas.ids, step, n),
      total_steps=unit.target_step, call_steps=spec.val_every, after_call=after_call,
      status=status, to_host=replicas.to_host, from_host=replicas.from_host,
      target_field="num_updates")
  outcome = loop.run_chunks(ctx, chunks)
  t0 = time.perf_counter()
  val = evaluate(outcome.state, "val", spec.eval_size)
  test = evaluate(outcome.state, "test", spec.eval_size)
  write("final", unit.target_step, outcome.elapsed + time.perf_counter() - t0,
        {"val_loss": val, "test_loss": test})


def write_report(workdir: str) -> list[str]:
  """report.md and the Figure-3-style PNGs (`rnn.report`); returns the paths."""
  return report.write_report(workdir)


def train_and_evaluate(config, workdir: str, **kwargs) -> runner.RunSummary:
  """Runs (or resumes) every unit of an RNN config into `workdir`.

  Keyword arguments go to `lie_unitary.experiments.runner.train_and_evaluate`
  (num_workers, printer, tensorboard, handle_signals).

  Raises:
    runner.ConfigError: a bad config field, before anything is written.
  """
  return runner.train_and_evaluate(sys.modules[__name__], config, workdir, **kwargs)
