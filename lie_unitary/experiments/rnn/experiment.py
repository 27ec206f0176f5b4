"""The RNN family of the shared runner (paper §4 and sequential images): a unit is one
(model, T, seed) of a config's task, its replicates trained together in calls of
`val_every` updates. Its "val" records, at step 0 and after every call: the validation
sets' metrics (images: also ``test_*``, ``epoch``), the call's mean ``train_*``, λ's
spectrum and ``u_drift`` = ‖U − U₀‖_F / √n where the model has them; its "final" ones:
the full validation and test losses (images: the parameter count)."""

from __future__ import annotations

import sys

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

__all__ = ["NAME", "budget_hidden_size", "make_task", "make_unit", "run_unit",
           "train_and_evaluate", "units", "validate_config", "write_report"]

NAME = "rnn"

# Relative cost per step and state unit² (the launch's ETA weights).
_COST = {"lstm": 8, "gurnn": 4, "gurnn_beta": 4, "free": 4, "urnn": 4, "irnn": 1, "tanh": 1,
         "orthogonal": 1}

write_report = report.write_report


def data_parallel(config) -> int:
  """`config.data_parallel`, or for 0 the most devices (a divisor of the device count)
  that divide the batch sizes."""
  if config.data_parallel:
    return config.data_parallel
  count = jax.device_count()
  sizes = [config.batch_size]
  if config.task in data.IMAGE_TASKS:
    sizes.append(config.eval_batch_size)
  return max(d for d in range(1, count + 1) if count % d == 0 and not any(s % d for s in sizes))


def validate_config(config) -> None:
  """Checks every field (image tasks: their files) before anything runs. Raises
  runner.ConfigError naming the first unknown, missing or bad field."""
  F.validate(config, config_lib.FIELDS)
  images_task = config.task in data.IMAGE_TASKS
  table = config.models
  expected = config_lib.image_models() if images_task else config_lib.paper_models(config.task)
  if not isinstance(table, (ml_collections.ConfigDict, dict)):
    F.fail("models", table, "a table like `paper_models(task)`'s")
  F.validate(table, {m: F.Field(None, "") for m in expected}, prefix="models.")
  for m, default in expected.items():
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


def budget_hidden_size(model: str, budget: str, input_size: int = 1,
                       output_size: int = 10) -> int:
  """The hidden size of `model` whose `trainer.num_params` is nearest expRNN's orthogonal
  RNN's at `budget` (ties: the smaller). Raises ValueError: unknown budget or model."""
  if budget not in config_lib.BUDGETS:
    raise ValueError(f"unknown parameter budget {budget!r}; expected one of "
                     f"{tuple(config_lib.BUDGETS)}.")
  target = trainer.num_params("orthogonal", config_lib.BUDGETS[budget]["orthogonal"],
                              input_size, output_size)
  activation = "modrelu" if model in config_lib.GURNN_MODELS else ""
  count = lambda n: trainer.num_params(model, n, input_size, output_size, activation)
  # Every model counted has at least the orthogonal RNN's n² / 2 recurrent reals.
  sizes = range(2, 2 * config_lib.BUDGETS[budget]["orthogonal"] + 2)
  return min(sizes, key=lambda n: (abs(count(n) - target), n))


_LAUNCH_FIELDS = ("model", "T", "seeds", "models")  # which units; each unit has its own


def make_unit(config, model: str, T: int, seed: int) -> Unit:
  """The unit of (model, T, seed) of a validated config: its spec every setting resolved
  (canonical task, `data_parallel`, the model's `models` entry, a budget's hidden size);
  its fields (identity) those whose `FIELDS` / `MODEL_FIELDS` rule holds for the model."""
  task = data.get_task(config.task).name
  resolved = {"task": task, "data_parallel": data_parallel(config)}
  values = {**{k: config[k] for k in config_lib.FIELDS if k not in _LAUNCH_FIELDS}, **resolved}
  entry = config.models[model].to_dict()
  if config.task in data.IMAGE_TASKS and config.param_budget:
    entry["hidden_size"] = budget_hidden_size(model, config.param_budget)
  table = {k: f for k, f in config_lib.FIELDS.items() if k not in _LAUNCH_FIELDS}
  fields = {"task": task, "model": model, "T": int(T), "seed": int(seed),
            **F.identity(values, table, model, config),
            **F.identity(entry, {k: config_lib.MODEL_FIELDS[k] for k in entry})}
  spec = F.resolved(values, **entry, model=model, T=int(T), seed=int(seed))
  cost = (config.num_updates * spec.T * spec.num_replicates * spec.hidden_size ** 2
          * _COST[model])
  return Unit(name=f"{task} T={spec.T} {model}",
              fields={k: (list(v) if isinstance(v, tuple) else v) for k, v in fields.items()},
              target_step=config.num_updates, cost=float(cost), spec=spec)


def units(config) -> list[Unit]:
  """One unit per (T, model, seed) of a validated config, in that order."""
  return [make_unit(config, model, T, seed)
          for T in config.T for model in config.model for seed in config.seeds]


def run_unit(config, unit: Unit, ctx: runner.UnitContext) -> None:
  """Trains (or resumes) one unit's replicates to `unit.target_step`.

  Raises:
    loop.Interrupted: after a checkpoint, when a stop was requested.
    runner.ConfigError: a checkpoint beyond the target step, image files that do not fit.
  """
  replicas = replicas_lib.Replicas(unit.spec.num_replicates, replicas_lib.replicate_sharding(
      data_parallel=unit.spec.data_parallel))
  loop.train_unit(make_task(config, unit, replicas), ctx, replicas)


def make_task(config, unit: Unit, replicas) -> loop.Task:
  """A unit's `loop.Task`: calls within a validation interval and an epoch, the history
  the interval's summed training metrics; records as the module docstring says."""
  spec, num = unit.spec, unit.spec.num_replicates
  image_task = spec.task in data.IMAGE_TASKS
  arrays = _load_sets(config, spec, replicas.mesh) if image_task else None
  source = (data.image_source(spec, arrays.train_y.shape[0]) if image_task
            else data.synthetic_source(spec))
  exp = trainer.make_experiment(spec, replicas.sharding, source)
  per_epoch, baseline = source.updates_per_epoch, data.get_task(spec.task).baseline(spec.T)
  # The initial parameters, kept for the drift (the restored state's buffers are donated).
  initial = exp.init(replicas.ids).params if exp.diagnostics is not None else None
  epoch = (lambda step: {"epoch": round(step / per_epoch, 4)}) if per_epoch else (
      lambda step: {})

  def evaluate_sets(state, sets):
    return {f"{name}_{k}": v for name, s in sets.items()
            for k, v in replicas.gather(exp.evaluate(state.params, s)).items()}

  epoch_data = {}  # {epoch: its image order}: once per epoch, never stored

  def train(state, history, step, num_steps):
    e = step // per_epoch if per_epoch else 0
    if e not in epoch_data:
      epoch_data.clear()
      epoch_data[e] = exp.epoch_data(replicas.ids, e)
    state, per_update = exp.train_chunk(state, replicas.ids, step, num_steps, epoch_data[e],
                                        arrays)
    sums = history.setdefault("train_sums", {})
    for k, v in replicas.gather(per_update).items():  # exact: float32 summed in float64
      sums[k] = np.asarray(sums.get(k, 0.0)) + v[:, :num_steps].sum(axis=1, dtype=np.float64)
    history["train_steps"] = history.get("train_steps", 0) + num_steps
    return state, history

  def evaluate(state, history, step):
    """The "val" records of `step` and their line; the interval's sums start again."""
    sums, count = history.pop("train_sums", {}), history.pop("train_steps", 0)
    val = {**evaluate_sets(state, source.val_sets(arrays)),
           **{f"train_{k}": np.asarray(v) / count for k, v in sums.items()}}
    if exp.diagnostics is not None:
      val.update(replicas.gather(exp.diagnostics(state.params, initial)))
    text = (", ".join(f"{k.replace('_', ' ')} {loop.median(v):.4g}" for k, v in val.items()
                      if k.startswith("val_")) + f" (median; loss baseline {baseline:.4g})"
            + loop.nonfinite_note(sums.get("loss", []), "training loss"))
    return [{"kind": "val", "replicate": r, "step": step, **epoch(step),
             **{k: float(v[r]) for k, v in val.items()}} for r in range(num)], history, text

  def finish(state, history):
    final = evaluate_sets(state, source.final_sets(arrays))
    if image_task:  # trainable reals (for the report's table)
      count = sum(int(np.prod(a.shape[1:])) for a in jax.tree.leaves(state.params["params"]))
      final["num_params"] = np.full(num, count)
    return {workdir_lib.RESULTS: [
        {"kind": "final", "replicate": r, "step": unit.target_step, **epoch(unit.target_step),
         **{k: float(v[r]) for k, v in final.items()}} for r in range(num)]}

  return loop.Task(lambda: (exp.init(replicas.ids), {}), train, evaluate, finish,
                   unit.target_step, every=spec.val_every, epoch_steps=per_epoch,
                   target_field="num_updates")


def _load_sets(config, spec, mesh) -> data.ImageSets:
  """The unit's image sets, replicated on every device of `mesh`."""
  folder = images.resolve_data_dir(spec.dataset, config.data_dir)
  sets = data.load_image_sets(folder, spec.task, spec.permutation_seed, spec.num_validation)
  if sets.test_y.shape[0] % spec.eval_batch_size:
    raise F.ConfigError(f"config.eval_batch_size = {spec.eval_batch_size}: expected a "
                        f"divisor of the {sets.test_y.shape[0]} test images of {folder}.")
  if sets.train_x.shape[1] != spec.T:
    raise F.ConfigError(f"config.T = ({spec.T},): the images of {folder} have "
                        f"{sets.train_x.shape[1]} pixels; set T to that.")
  everywhere = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
  return data.ImageSets(*(jax.device_put(a, everywhere) for a in sets))


def train_and_evaluate(config, workdir: str, **kwargs) -> runner.RunSummary:
  """Runs (or resumes) every unit of an RNN config into `workdir`; keyword arguments go to
  `runner.train_and_evaluate`. Raises runner.ConfigError: a bad config field."""
  return runner.train_and_evaluate(sys.modules[__name__], config, workdir, **kwargs)
