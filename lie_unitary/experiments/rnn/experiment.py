"""The RNN family of the shared runner: adding and memory problems (paper §4).

One unit is one (model, T) of a config's task, trained for `num_replicates`
replicates at once: their parameters, optimizer states and data streams are stacked
on a leading axis (sharded over all devices, `replicas.replicate_sharding`) and every
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
import numpy as np

from lie_unitary.experiments import fields as F
from lie_unitary.experiments import loop
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.fields import Unit
from lie_unitary.experiments.rnn import config as config_lib
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import images
from lie_unitary.experiments.rnn import report
from lie_unitary.experiments.rnn import trainer

__all__ = ["NAME", "run_unit", "train_and_evaluate", "unit_spec", "units", "validate_config",
           "write_report"]

NAME = "rnn"

# Relative cost per step and state unit² (matmul widths: LSTM 4 gates, the complex
# pair 2n) to start the longest units first when worker processes share them.
_COST = {"lstm": 8, "gurnn": 4, "gurnn_beta": 4, "free": 4, "urnn": 4, "irnn": 1, "tanh": 1,
         "orthogonal": 1}


# Validation -------------------------------------------------------------------------


def _validate_models(config) -> None:
  """The per-model table: the models of the task's table, each with its own fields."""
  paper = config_lib.task_models(config.task)
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
  if config.task in data.IMAGE_TASKS:
    _validate_images(config)
  if data.get_task(config.task).name == "adding" and min(config.T) < 2:
    F.fail("T", config.T, "integers ≥ 2 for the adding problem")
  if 0 < config.num_train < config.batch_size:
    F.fail("num_train", config.num_train, f"0 (fresh data) or ≥ batch_size = "
           f"{config.batch_size}")
  for field in (() if config.task in data.IMAGE_TASKS else ("val_size", "eval_size")):
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


def _validate_images(config) -> None:
  """The image tasks' own rules; their files must exist before anything is written."""
  wrong = [m for m in config.model if m not in config_lib.IMAGE_MODELS]
  if wrong:
    F.fail("model", config.model, f"models of the image tasks, {config_lib.IMAGE_MODELS}")
  if len(config.T) != 1:
    F.fail("T", config.T, "one T for an image task: its pixel count, e.g. (784,)")
  if config.eval_batch_size % config.data_parallel:
    F.fail("data_parallel", config.data_parallel,
           f"a divisor of eval_batch_size = {config.eval_batch_size}")
  if config.num_validation % config.eval_batch_size:
    F.fail("eval_batch_size", config.eval_batch_size,
           f"a divisor of num_validation = {config.num_validation}")
  try:
    images.check_dataset_files(images.resolve_data_dir(config.dataset, config.data_dir))
  except (FileNotFoundError, ValueError) as e:
    field = "data_dir" if config.data_dir else "dataset"
    raise F.ConfigError(f"config.{field} = {config[field]!r}: {' '.join(str(e).split())}"
                        ) from e


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
  if config.task in data.IMAGE_TASKS and config.param_budget:
    spec["hidden_size"] = config_lib.budget_hidden_size(model, config.param_budget)
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
  """Trains one unit (all replicates) to `unit.target_step`, resuming from its
  checkpoint; writes "val" records after every call and "final" records at the end.

  Raises:
    loop.Interrupted: after a checkpoint, when a stop was requested.
    runner.ConfigError: when the unit's checkpoint is beyond its target step.
  """
  spec = unit.spec
  if spec.task in data.IMAGE_TASKS:
    return _run_image_unit(config, unit, ctx)
  num = spec.num_replicates
  replicas = replicas_lib.Replicas(num, replicas_lib.replicate_sharding(
      data_parallel=spec.get("data_parallel", 1)))
  exp = trainer.make_experiment(spec, replicas.sharding)
  done = ctx.written()  # records of a resumed unit are not written twice
  baseline = data.get_task(spec.task).baseline(spec.T)

  def write(kind, step, elapsed, metrics):
    ctx.write([{"kind": kind, "replicate": r, "step": step, "seconds": round(elapsed, 3),
                **{k: float(v[r]) for k, v in metrics.items()}}
               for r in range(num) if (kind, r, step) not in done])
    ctx.scalars(step, {f"{kind}/{k}/replicate_{r}": v[r] for k, v in metrics.items()
                       for r in range(num)})

  def validate(state, size, **more):
    """The validation loss, and for λ models the spectrum diagnostics of λ."""
    out = {"val_loss": replicas.gather(exp.evaluate(state.params, "val", size)), **more}
    if exp.spectrum is not None:
      out.update(replicas.gather(exp.spectrum(state.params)))
    return out

  with loop.Loop(ctx, replicas, unit.target_step, target_field="num_updates") as lp:
    state, _ = lp.restore(exp.init(replicas.ids))
    if ("val", 0, 0) not in done:
      write("val", 0, 0.0, validate(state, spec.val_size))
    for step, num_steps in lp.calls(spec.val_every):
      state, train_loss = exp.train_chunk(state, replicas.ids, step, num_steps)
      val = validate(state, spec.val_size, train_loss=replicas.gather(train_loss))
      write("val", step + num_steps, lp.seconds(), val)
      lp.after_call(state, step + num_steps, {}, (
          f"val loss median {loop.median(val['val_loss']):.4g} (replicates "
          f"{', '.join(f'{v:.3g}' for v in val['val_loss'])}; baseline {baseline:.4g})"))
    elapsed = lp.finish(state, {})
    t0 = time.perf_counter()
    final = {"val_loss": exp.evaluate(state.params, "val", spec.eval_size),
             "test_loss": exp.evaluate(state.params, "test", spec.eval_size)}
    write("final", unit.target_step, elapsed + time.perf_counter() - t0, replicas.gather(final))


def _load_sets(config, spec, mesh) -> data.ImageSets:
  """The unit's image sets on the devices of `mesh` (replicated: every replicate reads
  them)."""
  folder = images.resolve_data_dir(spec.dataset, config.data_dir)
  sets = data.load_image_sets(folder, spec.task, spec.get("permutation_seed",
                                                           data.PERMUTATION_SEED),
                              spec.num_validation)
  if sets.test_y.shape[0] % spec.eval_batch_size:
    raise F.ConfigError(f"config.eval_batch_size = {spec.eval_batch_size}: expected a "
                        f"divisor of the {sets.test_y.shape[0]} test images of {folder}.")
  if sets.train_x.shape[1] != spec.T:
    raise F.ConfigError(f"config.T = ({spec.T},): the images of {folder} have "
                        f"{sets.train_x.shape[1]} pixels; set T to that.")
  everywhere = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  return data.ImageSets(*(jax.device_put(a, everywhere) for a in sets))


def _best(recs: list[dict], num: int) -> dict:
  """Per replicate, from its "val" records (after step 0): the test accuracy where the
  validation accuracy was best (the first such step), and the best test accuracy."""
  out = {k: np.full(num, np.nan) for k in ("test_accuracy", "best_test_accuracy",
                                           "best_val_accuracy", "best_step")}
  for r in range(num):
    rows = sorted((x for x in recs if x["replicate"] == r and x["step"] > 0),
                  key=lambda x: x["step"])
    if not rows:
      continue
    best = max(rows, key=lambda x: x["val_accuracy"])  # max keeps the first of ties
    out["test_accuracy"][r] = best["test_accuracy"]
    out["best_val_accuracy"][r] = best["val_accuracy"]
    out["best_step"][r] = best["step"]
    out["best_test_accuracy"][r] = max(x["test_accuracy"] for x in rows)
  return out


def _run_image_unit(config, unit: Unit, ctx: runner.UnitContext) -> None:
  """A sequential-image unit: val and test accuracy after every `val_every` updates
  ("val" records), and at the end (kind "final") each replicate's test accuracy at
  its best validation accuracy, the best test accuracy over the run (the published
  anchors' protocol), and its trainable parameter count."""
  spec = unit.spec
  num = spec.num_replicates
  replicas = replicas_lib.Replicas(num, replicas_lib.replicate_sharding(
      data_parallel=config.data_parallel))
  sets = _load_sets(config, spec, replicas.mesh)
  exp = trainer.make_image_experiment(spec, replicas.sharding, sets.train_y.shape[0])
  done = ctx.written()

  def write(kind, step, elapsed, metrics):
    ctx.write([{"kind": kind, "replicate": r, "step": step, "seconds": round(elapsed, 3),
                "epoch": round(step / exp.updates_per_epoch, 4),
                **{k: float(v[r]) for k, v in metrics.items()}}
               for r in range(num) if (kind, r, step) not in done])
    ctx.scalars(step, {f"{kind}/{k}/replicate_{r}": v[r] for k, v in metrics.items()
                       for r in range(num)})

  def evaluate(state):
    out = {}
    for which, x, y in (("val", sets.val_x, sets.val_y), ("test", sets.test_x, sets.test_y)):
      for k, v in replicas.gather(exp.evaluate(state.params, x, y)).items():
        out[f"{which}_{k}"] = v
    return out

  with loop.Loop(ctx, replicas, unit.target_step, target_field="num_updates") as lp:
    state, _ = lp.restore(exp.init(replicas.ids))
    if ("val", 0, 0) not in done:
      lp.status = "evaluating the initial state"
      write("val", 0, 0.0, evaluate(state))
    order, order_epoch = None, None
    for step, num_steps in lp.calls(spec.val_every, exp.updates_per_epoch):
      epoch = step // exp.updates_per_epoch
      if epoch != order_epoch:  # the epoch's image order: once per epoch, never stored
        order, order_epoch = exp.epoch_order(replicas.ids, epoch), epoch
      state, train = exp.train_chunk(state, replicas.ids, step, num_steps, order, sets)
      train = replicas.gather(train)
      lp.status = "evaluating"
      metrics = evaluate(state)
      write("val", step + num_steps, lp.seconds(),
            {**metrics, **{f"train_{k}": v for k, v in train.items()}})
      acc = metrics["val_accuracy"]
      lp.after_call(state, step + num_steps, {}, (
          f"epoch {(step + num_steps) / exp.updates_per_epoch:.2f}, val accuracy median "
          f"{loop.median(acc):.4f} (replicates {', '.join(f'{v:.4f}' for v in acc)})"
          f"{loop.nonfinite_note(train['loss'], 'training loss')}"))
    elapsed = lp.finish(state, {})
  # Per replicate: every leaf's size without its replicate axis.
  count = sum(int(np.prod(a.shape[1:])) for a in jax.tree.leaves(state.params["params"]))
  recs = [r for r in workdir_lib.read(ctx.workdir)
          if r.get("unit") == unit.id and r.get("kind") == "val"]
  write("final", unit.target_step, elapsed, {**_best(recs, num),
                                             "num_params": np.full(num, count)})


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
