"""The RNN family of the shared runner: adding and memory problems (paper §4), and
sequential images. A unit is one (model, T) of a config's task, its replicates trained
by one program (`rnn.trainer.make_experiment`) in calls of `val_every` updates.

Records of kind "val", at step 0 and after every call: the validation sets' metrics
(images: also ``test_*`` and ``epoch``), the call's mean ``train_*`` metrics and, for
models with λ on the synthetic tasks, λ's spectrum diagnostics. Of kind "final": the
full validation and test losses, or for images a summary of the "val" records.
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

# Relative cost per step and state unit² (the launch's ETA weights).
_COST = {"lstm": 8, "gurnn": 4, "gurnn_beta": 4, "free": 4, "urnn": 4, "irnn": 1, "tanh": 1,
         "orthogonal": 1}

write_report = report.write_report


def data_parallel(config) -> int:
  """`config.data_parallel`, or with 0 the most devices (a divisor of the device count)
  that divide the batch size (and an image task's evaluation batch size)."""
  if config.data_parallel:
    return config.data_parallel
  count = jax.device_count()
  sizes = [config.batch_size]
  if config.task in data.IMAGE_TASKS:
    sizes.append(config.eval_batch_size)
  return max(d for d in range(1, count + 1) if count % d == 0 and not any(s % d for s in sizes))


def validate_config(config) -> None:
  """Checks every field (for image tasks, that their files exist and fit) before anything
  runs. Raises runner.ConfigError naming the first unknown, missing or bad field."""
  F.validate(config, config_lib.FIELDS)
  images_task = config.task in data.IMAGE_TASKS
  table = config.models
  expected = config_lib.image_models() if images_task else config_lib.paper_models(config.task)
  if not isinstance(table, (ml_collections.ConfigDict, dict)):
    F.fail("models", table, "a table like `paper_models(task)`'s")
  for m in table.keys():
    if m not in expected:
      raise F.ConfigError(f"config has no field 'models.{m}'; the models are "
                          f"{sorted(expected.keys())}.")
  for m, default in expected.items():
    if m not in table:
      raise F.ConfigError(f"config field 'models.{m}' is missing.")
    F.validate(table[m], {k: config_lib.MODEL_FIELDS[k] for k in default.keys()},
               prefix=f"models.{m}.")
  if data.get_task(config.task).name == "adding" and min(config.T) < 2:
    F.fail("T", config.T, "integers ≥ 2 for the adding problem")
  if 0 < config.num_train < config.batch_size:
    F.fail("num_train", config.num_train, f"0 (fresh data) or ≥ batch_size = "
           f"{config.batch_size}")
  for field in () if images_task else ("val_size", "eval_size"):
    if config[field] % config.eval_batch_size:
      F.fail(field, config[field], f"a multiple of eval_batch_size = {config.eval_batch_size}")
  for size in ("batch_size", "eval_batch_size") if images_task else ("batch_size",):
    if config[size] % data_parallel(config):
      F.fail("data_parallel", config.data_parallel, f"a divisor of {size} = {config[size]}")
  if jax.device_count() % data_parallel(config):
    F.fail("data_parallel", config.data_parallel,
           f"a divisor of the device count, {jax.device_count()} (the launcher makes one "
           "CPU device per core, --cpu_devices; several processes: --num_processes)")
  if not images_task:
    return
  if any(m not in config_lib.IMAGE_MODELS for m in config.model):
    F.fail("model", config.model, f"models of the image tasks, {config_lib.IMAGE_MODELS}")
  if len(config.T) != 1:
    F.fail("T", config.T, "one T for an image task: its pixel count, e.g. (784,)")
  if config.num_validation % config.eval_batch_size:
    F.fail("eval_batch_size", config.eval_batch_size,
           f"a divisor of num_validation = {config.num_validation}")
  try:  # the files must exist before anything is written
    if config.download and config.dataset in images.DATASETS:
      try:
        images.resolve_data_dir(config.dataset, config.data_dir)
      except FileNotFoundError:
        from lie_unitary.experiments.rnn import download
        download.download(config.dataset, config.data_dir or None)
    images.check_dataset_files(images.resolve_data_dir(config.dataset, config.data_dir))
  except (OSError, ValueError) as e:  # a missing or bad file, a failed download
    field = "data_dir" if config.data_dir else "dataset"
    raise F.ConfigError(f"config.{field} = {config[field]!r}: {' '.join(str(e).split())}"
                        ) from e


def unit_spec(config, model: str, T: int) -> ml_collections.FrozenConfigDict:
  """A unit's fields, frozen: the task, model, T, the `config.FIELDS` whose identity rule
  holds for the model, and the model's entry of `models` (its clip_norm only when > 0)."""
  spec = {"task": data.get_task(config.task).name, "model": model, "T": int(T),
          **F.identity(config, config_lib.FIELDS, model)}
  spec["data_parallel"] = data_parallel(config)  # as resolved: 0 names no layout
  spec.update(config.models[model].to_dict())
  if not spec["clip_norm"]:  # off: the identity of the units recorded before it existed
    del spec["clip_norm"]
  if config.task in data.IMAGE_TASKS and config.param_budget:
    spec["hidden_size"] = config_lib.budget_hidden_size(model, config.param_budget)
  return ml_collections.FrozenConfigDict(spec)


def units(config) -> list[Unit]:
  """One unit per (model, T) of a validated config, T-major."""
  out = []
  for T in config.T:
    for model in config.model:
      spec = unit_spec(config, model, T)
      cost = (config.num_updates * spec.T * spec.num_replicates * spec.hidden_size ** 2
              * _COST[model])
      out.append(Unit(name=f"{spec.task} T={spec.T} {spec.model}",
                      fields={k: (list(v) if isinstance(v, tuple) else v)
                              for k, v in spec.items()},
                      target_step=config.num_updates, cost=float(cost), spec=spec))
  return out


def run_unit(config, unit: Unit, ctx: runner.UnitContext) -> None:
  """Trains one unit's replicates to `unit.target_step`, resuming from its checkpoint.

  Raises:
    loop.Interrupted: after a checkpoint, when a stop was requested.
    runner.ConfigError: a checkpoint beyond the target step, or image files that do not
      fit the config.
  """
  spec, num = unit.spec, unit.spec.num_replicates
  replicas = replicas_lib.Replicas(num, replicas_lib.replicate_sharding(
      data_parallel=spec.data_parallel))
  image_task = spec.task in data.IMAGE_TASKS
  arrays = _load_sets(config, spec, replicas.mesh) if image_task else None
  source = (data.image_source(spec, arrays.train_y.shape[0]) if image_task
            else data.synthetic_source(spec))
  exp = trainer.make_experiment(spec, replicas.sharding, source)
  spectrum = None if image_task else exp.spectrum
  per_epoch, baseline = source.updates_per_epoch, data.get_task(spec.task).baseline(spec.T)
  done = ctx.written()  # records of a resumed unit are not written twice

  def write(kind, step, elapsed, metrics):
    epoch = {"epoch": round(step / per_epoch, 4)} if per_epoch else {}
    ctx.write([{"kind": kind, "replicate": r, "step": step, "seconds": round(elapsed, 3),
                **epoch, **{k: float(v[r]) for k, v in metrics.items()}}
               for r in range(num) if (kind, r, step) not in done])

  def evaluate(state, sets):
    return {f"{name}_{k}": v for name, s in sets.items()
            for k, v in replicas.gather(exp.evaluate(state.params, s)).items()}

  def validate(state, train):
    out = {**evaluate(state, source.val_sets(arrays)), **train}
    if spectrum is not None:
      out.update(replicas.gather(spectrum(state.params)))
    return out

  def status(val, train, step):  # the progress line
    shown = ", ".join(f"{k.replace('_', ' ')} median {loop.median(v):.4g} (replicates "
                      f"{', '.join(f'{x:.3g}' for x in v)})"
                      for k, v in val.items() if k.startswith("val_"))
    return (f"{f'epoch {step / per_epoch:.2f}, ' if per_epoch else ''}{shown}; loss baseline "
            f"{baseline:.4g}{loop.nonfinite_note(train['loss'], 'training loss')}")

  with loop.Loop(ctx, replicas, unit.target_step, target_field="num_updates") as lp:
    state, _ = lp.restore(exp.init(replicas.ids))
    if ("val", 0, 0) not in done:
      lp.status = "evaluating the initial state"
      write("val", 0, 0.0, validate(state, {}))
    this_epoch, data_epoch = None, None
    for step, num_steps in lp.calls(spec.val_every, per_epoch):
      epoch = step // per_epoch if per_epoch else 0
      if epoch != data_epoch:  # the epoch's data (image order): once per epoch, never stored
        this_epoch, data_epoch = exp.epoch_data(replicas.ids, epoch), epoch
      state, train = exp.train_chunk(state, replicas.ids, step, num_steps, this_epoch, arrays)
      train = replicas.gather(train)
      lp.status = "evaluating"
      val = validate(state, {f"train_{k}": v for k, v in train.items()})
      write("val", step + num_steps, lp.seconds(), val)
      lp.after_call(state, step + num_steps, {}, status(val, train, step + num_steps))
    elapsed = lp.finish(state, {})
    t0 = time.perf_counter()
    final = evaluate(state, source.final_sets(arrays))
    if image_task:
      final.update(_image_summary(ctx, unit, state))
    write("final", unit.target_step, elapsed + time.perf_counter() - t0, final)


def _load_sets(config, spec, mesh) -> data.ImageSets:
  """The unit's image sets, replicated on every device of `mesh`."""
  folder = images.resolve_data_dir(spec.dataset, config.data_dir)
  seed = spec.get("permutation_seed", data.PERMUTATION_SEED)  # only the permuted task's
  sets = data.load_image_sets(folder, spec.task, seed, spec.num_validation)
  if sets.test_y.shape[0] % spec.eval_batch_size:
    raise F.ConfigError(f"config.eval_batch_size = {spec.eval_batch_size}: expected a "
                        f"divisor of the {sets.test_y.shape[0]} test images of {folder}.")
  if sets.train_x.shape[1] != spec.T:
    raise F.ConfigError(f"config.T = ({spec.T},): the images of {folder} have "
                        f"{sets.train_x.shape[1]} pixels; set T to that.")
  everywhere = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  return data.ImageSets(*(jax.device_put(a, everywhere) for a in sets))


def _image_summary(ctx, unit: Unit, state) -> dict:
  """An image unit's "final" metrics (R,): from its "val" records after step 0, the test
  accuracy at the (first) best validation accuracy, the best test accuracy, the best
  validation accuracy and its step; and the trainable parameter count."""
  num = unit.spec.num_replicates
  recs = [r for r in workdir_lib.read(ctx.workdir)
          if r.get("unit") == unit.id and r.get("kind") == "val" and r["step"] > 0]
  out = {k: np.full(num, np.nan) for k in ("test_accuracy", "best_test_accuracy",
                                           "best_val_accuracy", "best_step")}
  for r in range(num):
    rows = sorted((x for x in recs if x["replicate"] == r), key=lambda x: x["step"])
    if rows:
      best = max(rows, key=lambda x: x["val_accuracy"])  # max keeps the first of ties
      out["test_accuracy"][r], out["best_val_accuracy"][r], out["best_step"][r] = (
          best["test_accuracy"], best["val_accuracy"], best["step"])
      out["best_test_accuracy"][r] = max(x["test_accuracy"] for x in rows)
  count = sum(int(np.prod(a.shape[1:])) for a in jax.tree.leaves(state.params["params"]))
  return {**out, "num_params": np.full(num, count)}


def train_and_evaluate(config, workdir: str, **kwargs) -> runner.RunSummary:
  """Runs (or resumes) every unit of an RNN config into `workdir`; keyword arguments go to
  `runner.train_and_evaluate`. Raises runner.ConfigError for a bad config field."""
  return runner.train_and_evaluate(sys.modules[__name__], config, workdir, **kwargs)
