"""The RNN family of the shared runner: adding and memory problems (paper §4).

One unit is one (model, T) of a config's task, trained for `num_replicates`
replicates at once: their parameters, optimizer states and data streams are stacked
on a leading axis (sharded over all devices, `sweep.replicate_sharding`) and every
step is one vmapped, jitted program (`rnn.training.make_experiment`). Training runs
in chunks of `val_every` updates; after each chunk the validation loss on a fixed
subsample is written (records of kind "val"), about every 5% of the run and at the
end the stacked state is checkpointed, and at the end the full validation and test
sets are evaluated (kind "final").

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

import math
import os
import time

import jax
from jax.experimental import multihost_utils
import jax.numpy as jnp
import ml_collections
import numpy as np

from lie_unitary import nn as lnn
from lie_unitary.experiments import records
from lie_unitary.experiments import runner
from lie_unitary.experiments import sweep
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import report
from lie_unitary.experiments.rnn import tasks
from lie_unitary.experiments.rnn import training
from lie_unitary.experiments.units import Unit

__all__ = ["NAME", "run_unit", "unit_spec", "units", "validate_config", "write_report"]

NAME = "rnn"

# Shared config fields in a unit's spec, and the models they concern (None: all).
# Not here: model and T (one of each per unit), models (the unit's entry is merged
# in) and num_updates (where a unit stops: its target step, not its identity).
_SHARED = {
    "h0": training.H0_MODELS, "lambda_init": training.LAMBDA_MODELS,
    "lambda_init_std": training.LAMBDA_MODELS, "lambda_optimizer": training.LAMBDA_MODELS,
    "lr_drops": None, "lr_drop_factor": None, "rmsprop_decay": None, "rmsprop_eps": None,
    "rmsprop_initial_scale": None, "num_replicates": None, "batch_size": None,
    "num_train": None, "val_every": None, "val_size": None, "eval_size": None,
    "eval_batch_size": None, "seed": None, "eval_seed": None, "unroll": None,
}
# λ refresh fields: in the spec of λ models only when lambda_refresh is not "none", so
# units without a refresh keep the identity they had before these fields existed.
_REFRESH = ("lambda_refresh", "lambda_refresh_every", "lambda_refresh_state")
_ACTIVATIONS = ("relu", "tanh", "identity", "modrelu")
# Relative cost per step and state unit² (matmul widths: LSTM 4 gates, the complex
# pair 2n) to start the longest units first when worker processes share them.
_COST = {"lstm": 8, "gurnn": 4, "gurnn_beta": 4, "free": 4, "urnn": 4, "irnn": 1, "tanh": 1}


# Validation -------------------------------------------------------------------------


def _fail(field: str, value, expected: str):
  raise runner.ConfigError(f"config.{field} = {value!r}: expected {expected}.")


def _is_int(v) -> bool:
  return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_number(v) -> bool:
  return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
          and math.isfinite(v))


def _check_int(config, field, name=None, minimum=1):
  value = config[field]
  if not _is_int(value) or value < minimum:
    _fail(name or field, value, f"an integer ≥ {minimum}")


def _check_number(config, field, name=None, positive=False):
  value = config[field]
  if not _is_number(value) or value < 0 or (positive and value == 0):
    _fail(name or field, value, "a finite number " + ("> 0" if positive else "≥ 0"))


def _check_choice(config, field, choices, name=None):
  if config[field] not in choices:
    _fail(name or field, config[field], f"one of {choices}")


def _check_keys(config, defaults, prefix=""):
  """Unknown and missing fields, recursively into the per-model table."""
  for key in config.keys():
    if key not in defaults:
      raise runner.ConfigError(
          f"unknown config field {prefix + key!r}; the fields are {sorted(defaults.keys())}.")
  for key in defaults.keys():
    if key not in config:
      raise runner.ConfigError(f"config field {prefix + key!r} is missing.")
    if isinstance(defaults[key], (ml_collections.ConfigDict, dict)):
      if not isinstance(config[key], (ml_collections.ConfigDict, dict)):
        _fail(prefix + key, config[key], "a table like the default's")
      _check_keys(config[key], defaults[key], f"{prefix}{key}.")


def validate_config(config) -> None:
  """Checks every field before anything runs or is written.

  Raises:
    runner.ConfigError: naming the first unknown, missing or bad field and what it
      may be.
  """
  _check_keys(config, rnn_config.get_config())
  task = config.task
  if task not in (*tasks.TASKS, "copy"):
    _fail("task", task, f"one of {(*tasks.TASKS, 'copy')}")
  models = config.model
  if not isinstance(models, (tuple, list)) or not models:
    _fail("model", models, f"a non-empty tuple of models from {training.MODELS}")
  for m in models:
    if m not in training.MODELS:
      hint = (" (several models: --config.model=gurnn --config.model=lstm)"
              if isinstance(m, str) and "," in m else "")
      _fail("model", models, f"models from {training.MODELS}{hint}")
  if len(set(models)) != len(models):
    _fail("model", models, "each model once")
  min_T = 2 if tasks.get_task(task).name == "adding" else 1
  if (not isinstance(config.T, (tuple, list)) or not config.T
      or not all(_is_int(T) and T >= min_T for T in config.T)):
    _fail("T", config.T, f"a non-empty tuple of integers ≥ {min_T}")
  if len(set(config.T)) != len(config.T):
    _fail("T", config.T, "each T once")
  for m, table in config.models.items():
    if "beta" in table:
      _check_number(table, "beta", f"models.{m}.beta", positive=True)
    if "activation" in table:
      _check_choice(table, "activation", _ACTIVATIONS, f"models.{m}.activation")
    _check_int(table, "hidden_size", f"models.{m}.hidden_size")
    _check_number(table, "learning_rate", f"models.{m}.learning_rate", positive=True)
    if "lambda_learning_rate" in table:
      _check_number(table, "lambda_learning_rate", f"models.{m}.lambda_learning_rate",
                    positive=True)
    _check_number(table, "clip_value", f"models.{m}.clip_value")
  _check_choice(config, "h0", ("random", "zeros"))
  _check_choice(config, "lambda_init", training.LAMBDA_INITS)
  _check_number(config, "lambda_init_std")
  _check_choice(config, "lambda_refresh", training.LAMBDA_REFRESHES)
  _check_int(config, "lambda_refresh_every")
  _check_choice(config, "lambda_refresh_state", training.LAMBDA_REFRESH_STATES)
  _check_choice(config, "lambda_optimizer", ("sgd", "rmsprop"))
  if (not isinstance(config.lr_drops, (tuple, list))
      or not all(_is_int(d) and d >= 0 for d in config.lr_drops)):
    _fail("lr_drops", config.lr_drops, "a tuple of update indices ≥ 0, e.g. (45000, 65000)")
  _check_number(config, "lr_drop_factor")
  for field in ("num_updates", "num_replicates", "batch_size", "val_every", "val_size",
                "eval_size", "eval_batch_size", "unroll"):
    _check_int(config, field)
  _check_int(config, "num_train", minimum=0)
  if 0 < config.num_train < config.batch_size:
    _fail("num_train", config.num_train, f"0 (fresh data) or ≥ batch_size = {config.batch_size}")
  for field in ("val_size", "eval_size"):
    if config[field] % config.eval_batch_size:
      _fail(field, config[field], f"a multiple of eval_batch_size = {config.eval_batch_size}")
  if not _is_number(config.rmsprop_decay) or not 0 <= config.rmsprop_decay < 1:
    _fail("rmsprop_decay", config.rmsprop_decay, "a number in [0, 1)")
  _check_number(config, "rmsprop_eps")
  _check_number(config, "rmsprop_initial_scale")
  for field in ("seed", "eval_seed"):
    _check_int(config, field, minimum=0)
  _check_choice(config, "kernel", lnn.KERNELS)
  _check_int(config, "data_parallel")
  if config.batch_size % config.data_parallel:
    _fail("data_parallel", config.data_parallel,
          f"a divisor of batch_size = {config.batch_size}")
  if jax.device_count() % config.data_parallel:
    _fail("data_parallel", config.data_parallel,
          f"a divisor of the device count, {jax.device_count()} (several processes: "
          "--num_processes; one CPU process: "
          "XLA_FLAGS=--xla_force_host_platform_device_count=N)")


# Units ------------------------------------------------------------------------------


def unit_spec(config, model: str, T: int) -> ml_collections.FrozenConfigDict:
  """Every setting of one (model, T): the task, the shared fields that concern the
  model (`_SHARED`) and the model's entry of the per-model table. Frozen and hashable
  (it keys the cache of compiled programs); a unit's fields are exactly these."""
  spec = {"task": tasks.get_task(config.task).name, "model": model, "T": int(T)}
  for field, concerns in _SHARED.items():
    if concerns is None or model in concerns:
      value = config[field]
      spec[field] = tuple(value) if isinstance(value, (tuple, list)) else value
  if model in training.LAMBDA_MODELS and config.lambda_refresh != "none":
    spec.update({field: config[field] for field in _REFRESH})
  if config.kernel != "scan" and model in training.FUSED_MODELS:  # scan units keep theirs
    spec["kernel"] = config.kernel
  if config.data_parallel > 1:  # one device's units keep their identity
    spec["data_parallel"] = int(config.data_parallel)
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


def _gather(x, num: int) -> np.ndarray:
  """A replicate-sharded array as numpy on every process, the padding dropped."""
  if jax.process_count() > 1:
    x = multihost_utils.process_allgather(x, tiled=True)
  return np.asarray(x)[:num]


def _unpad(state, num: int, padded: int):
  return state if num == padded else jax.tree.map(lambda a: a[:num], state)


def _repad(restored, fresh, num: int, padded: int, sharding):
  """The restored replicates, then the padding replicates of `fresh`, resharded."""
  if num == padded:
    return restored
  return jax.jit(lambda a, b: jax.tree.map(
      lambda x, y: jnp.concatenate([x, y[num:]]), a, b), out_shardings=sharding)(restored, fresh)


def _tensorboard(ctx):
  if not ctx.tensorboard or jax.process_index() != 0:
    return None
  try:
    from tensorboardX import SummaryWriter
  except ImportError as e:
    raise runner.ConfigError("--tensorboard needs the tensorboardX package "
                             "(pip install tensorboardX).") from e
  return SummaryWriter(os.path.join(ctx.workdir, "tensorboard", ctx.unit.slug))


def run_unit(config, unit: Unit, ctx: runner.UnitContext) -> None:
  """Trains one unit (all replicates) to `unit.target_step`, resuming from its
  checkpoint; writes val records per chunk and final records at the end.

  Raises:
    interrupts.Interrupted: after a checkpoint, when a stop was requested.
    runner.ConfigError: when the unit's checkpoint is beyond its target step.
  """
  del config  # everything is in unit.spec
  spec, target = unit.spec, unit.target_step
  num = spec.num_replicates
  sharding = sweep.replicate_sharding(data_parallel=spec.get("data_parallel", 1))
  padded = sweep.padded_size(num, sharding.mesh.shape[sweep.AXIS])
  exp = training.make_experiment(spec, sharding)
  ids = np.arange(padded, dtype=np.int32)
  ids = jax.make_array_from_callback((padded,), sharding, lambda index: ids[index])
  state = exp.init(ids)
  step, elapsed = 0, 0.0
  ckpt = ctx.checkpointer()
  if ckpt.latest_step() is not None:
    restored, meta = ckpt.restore(_unpad(state, num, padded))
    step, elapsed = int(meta["step"]), float(meta["elapsed"])
    if step > target:
      raise runner.ConfigError(
          f"{unit.name}: its checkpoint is at update {step}, beyond num_updates = {target}; "
          f"use num_updates ≥ {step} (its records up to {target} are in results.jsonl).")
    state = _repad(restored, state, num, padded, sharding)
    ctx.printer(f"{unit.name}: resumed at step {step} ({elapsed:.0f}s so far)")
  # Records already written (after the last checkpoint, before a crash) are not repeated.
  done = {(r.get("kind"), r.get("replicate"), r.get("step")) for r in records.read_records(
      os.path.join(ctx.workdir, "results.jsonl")) if r.get("unit") == unit.id}
  writer = _tensorboard(ctx)
  baseline = tasks.get_task(spec.task).baseline(spec.T)

  def val_metrics(**losses):
    """Losses, and for λ models the spectrum diagnostics of the current λ."""
    out = dict(losses)
    if exp.spectrum is not None:
      out.update({k: _gather(v, num) for k, v in exp.spectrum(state.params).items()})
    return out

  def write(kind, metrics):
    recs = [{"kind": kind, "replicate": r, "step": step, "seconds": round(elapsed, 3),
             **{k: float(v[r]) for k, v in metrics.items()}}
            for r in range(num) if (kind, r, step) not in done]
    ctx.write(recs)
    if writer is not None:
      for k, v in metrics.items():
        for r in range(num):
          writer.add_scalar(f"{kind}/{k}/replicate_{r}", float(v[r]), step)
      writer.flush()

  def save():
    ckpt.save(step, _unpad(state, num, padded), {"step": step, "elapsed": elapsed})

  try:
    if step == 0:
      write("val", val_metrics(
          val_loss=_gather(exp.evaluate(state.params, "val", spec.val_size), num)))
    last_ckpt = step
    # A checkpoint (and a progress line) about every 5% of the run.
    ckpt_every = spec.val_every * max(1, target // (20 * spec.val_every))
    while step < target:
      t0 = time.perf_counter()
      chunk = min(spec.val_every, target - step)
      state, train_loss = exp.train_chunk(state, ids, step, chunk)
      val = _gather(exp.evaluate(state.params, "val", spec.val_size), num)
      train_loss = _gather(train_loss, num)
      elapsed += time.perf_counter() - t0
      step += chunk
      write("val", val_metrics(val_loss=val, train_loss=train_loss))
      if step - last_ckpt >= ckpt_every or step >= target or ctx.stop.requested():
        save()
        last_ckpt = step
        rate = step / max(elapsed, 1e-9)
        ctx.printer(f"{unit.name}: step {step}/{target}, val loss median {np.median(val):.4g} "
                    f"(replicates {', '.join(f'{v:.3g}' for v in val)}; baseline "
                    f"{baseline:.4g}), {elapsed:.0f}s, ETA {(target - step) / rate:.0f}s")
        ctx.check_stop()
    t0 = time.perf_counter()
    val = _gather(exp.evaluate(state.params, "val", spec.eval_size), num)
    test = _gather(exp.evaluate(state.params, "test", spec.eval_size), num)
    elapsed += time.perf_counter() - t0
    write("final", {"val_loss": val, "test_loss": test})
  finally:
    ckpt.close()
    if writer is not None:
      writer.close()


def write_report(workdir: str) -> list[str]:
  """report.md and the Figure-3-style PNGs (`rnn.report`); returns the paths."""
  return report.write_report(workdir)
