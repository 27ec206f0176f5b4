"""The operator-learning experiment: config → settings → records (paper §3).

`validate_config(config)` checks every field before any compute and names the bad
one. `settings(config)` lists the units of work: per n, one ``baselines`` setting
(true, rand, lstsq together) and one setting per (approach, basis scale, learning
rate). `run_experiment(config, workdir)` runs them through `sweep.run_settings`
(replicates vmapped and sharded; resume; progress lines) and writes

- ``WORKDIR/results.jsonl``: one record per (n, approach, generator, replicate, ...)
  with ``test_loss``, ``final_val_loss``, ``steps``, ``seconds`` (wall time of the
  setting's program, all replicates together, compilation included) and the
  setting's fields;
- ``WORKDIR/curves.jsonl``: the validation curve of each trained record
  (``val_steps``, ``val_loss``);
- ``WORKDIR/config.json``: the config of the last run.
"""

from __future__ import annotations

import json
import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary.experiments.operators import task as ol
from lie_unitary.experiments import sweep
from lie_unitary.experiments import workers

__all__ = ["KEY_FIELDS", "Setting", "epochs_for", "run_experiment", "settings",
           "validate_config"]

KEY_FIELDS = ("n", "approach", "replicate", "optimizer", "learning_rate", "num_epochs",
              "basis_scale")
_COMPLEX_APPROACHES = ("lie_algebra", "lie_restricted", "arjovsky", "projection")
_REAL_APPROACHES = ("so_algebra", "projection_orthogonal")
_BASIS_KEY = 1_000_003  # fold_in tag of the change-of-basis matrices


class Setting(NamedTuple):
  """One unit of work: all replicates of one (n, approach, basis scale, lr)."""
  n: int
  approach: str  # a parametrization, or "baselines"
  num_epochs: int
  learning_rate: float
  basis_scale: float


def _fail(field, value, why):
  raise ValueError(f"config.{field} = {value!r}: {why}")


def _is_int(v):
  return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def epochs_for(config, n: int) -> int:
  """Epochs at size n from ``config.num_epochs`` ((n, epochs) pairs; n = 0: default)."""
  table = {int(k): int(e) for k, e in config.num_epochs}
  if n in table:
    return table[n]
  if 0 in table:
    return table[0]
  _fail("num_epochs", config.num_epochs, f"no entry for n = {n} and no default (0, e).")


def validate_config(config) -> None:
  """Checks every field of a learn_unitary config; raises before any compute.

  Raises:
    ValueError: naming the first bad field (unknown approach or generator, n < 1,
      step counts that do not divide, ...).
  """
  field = config.field
  if field not in ("complex", "real"):
    _fail("field", field, "expected 'complex' or 'real'.")
  n_values = tuple(config.n_values)
  if not n_values or not all(_is_int(n) and n >= 1 for n in n_values):
    _fail("n_values", config.n_values, "expected a non-empty tuple of integers n ≥ 1.")
  if field == "real" and min(n_values) < 2:
    _fail("n_values", config.n_values, "SO(n) needs n ≥ 2.")
  allowed = (_COMPLEX_APPROACHES if field == "complex" else _REAL_APPROACHES) + ol.BASELINES
  approaches = tuple(config.approaches)
  if not approaches:
    _fail("approaches", config.approaches, "expected at least one approach.")
  for a in approaches:
    if a not in allowed:
      _fail("approaches", config.approaches,
            f"unknown approach {a!r} for field {field!r}; expected some of {allowed}.")
  gens = ol.COMPLEX_GENERATORS if field == "complex" else ol.REAL_GENERATORS
  if not tuple(config.generators) or any(g not in gens for g in config.generators):
    _fail("generators", config.generators, f"expected a non-empty tuple from {gens}.")
  for name in ("num_replicates", "batch_size", "num_train", "num_val", "num_test",
               "val_every", "val_subsample"):
    value = config[name]
    if not _is_int(value) or value < 1:
      _fail(name, value, "expected a positive integer.")
  if config.batch_size > config.num_train:
    _fail("batch_size", config.batch_size, f"exceeds num_train = {config.num_train}.")
  steps = config.num_train // config.batch_size
  if steps % config.val_every:
    _fail("val_every", config.val_every,
          f"must divide the steps per epoch num_train // batch_size = {steps}.")
  try:
    pairs = [(int(k), int(e)) for k, e in config.num_epochs]
  except (TypeError, ValueError):
    _fail("num_epochs", config.num_epochs, "expected (n, epochs) pairs, e.g. ((0, 1),).")
  if any(e < 1 or k < 0 for k, e in pairs):
    _fail("num_epochs", config.num_epochs, "epochs must be ≥ 1 and n ≥ 0.")
  for n in n_values:
    epochs_for(config, n)
  if config.optimizer not in ("sgd", "rmsprop"):
    _fail("optimizer", config.optimizer, "expected 'sgd' or 'rmsprop'.")
  for name in ("learning_rate", "rmsprop_decay", "noise_std", "lie_target_std"):
    value = config[name]
    if not isinstance(value, (int, float)) or not np.isfinite(value) or value < 0:
      _fail(name, value, "expected a finite non-negative number.")
  if config.learning_rate <= 0:
    _fail("learning_rate", config.learning_rate, "expected > 0.")
  if config.dtype not in ("complex64", "complex128"):
    _fail("dtype", config.dtype, "expected 'complex64' or 'complex128'.")
  if not _is_int(config.seed):
    _fail("seed", config.seed, "expected an integer.")
  scales = tuple(config.basis_scales)
  if not scales or any(not isinstance(c, (int, float)) or c < 0 for c in scales):
    _fail("basis_scales", config.basis_scales, "expected a non-empty tuple of c ≥ 0.")
  trained = [a for a in approaches if a not in ol.BASELINES]
  if any(c > 0 for c in scales) and any(a != "lie_algebra" for a in trained):
    _fail("basis_scales", config.basis_scales,
          f"a change of basis applies to 'lie_algebra' only; approaches = {approaches}.")
  divisors = tuple(config.lr_divisors)
  if not divisors or any(not isinstance(d, (int, float)) or d <= 0 for d in divisors):
    _fail("lr_divisors", config.lr_divisors, "expected a non-empty tuple of d > 0.")


def settings(config) -> list[Setting]:
  """The units of work, smallest n first; baselines before the trained approaches."""
  out = []
  for n in config.n_values:
    epochs = epochs_for(config, n)
    if any(a in ol.BASELINES for a in config.approaches):
      out.append(Setting(n, "baselines", 0, 0.0, 0.0))
    for a in config.approaches:
      if a in ol.BASELINES:
        continue
      for c in config.basis_scales:
        for d in config.lr_divisors:
          out.append(Setting(n, a, epochs, float(config.learning_rate) / float(d), float(c)))
  return out


def _task(config, n) -> ol.TaskSpec:
  return ol.TaskSpec(
      n=n, field=config.field, generators=tuple(config.generators),
      num_train=config.num_train, num_val=config.num_val, num_test=config.num_test,
      val_subsample=config.val_subsample, noise_std=float(config.noise_std),
      lie_target_std=float(config.lie_target_std),
      real_dtype="float64" if config.dtype == "complex128" else "float32")


def _train_spec(config, s: Setting) -> ol.TrainSpec:
  return ol.TrainSpec(
      approach=s.approach, optimizer=config.optimizer, learning_rate=s.learning_rate,
      rmsprop_decay=float(config.rmsprop_decay), batch_size=config.batch_size,
      num_epochs=s.num_epochs, val_every=config.val_every, basis_scale=s.basis_scale)


def _setting_key(config, n):
  return jax.random.fold_in(jax.random.key(config.seed), n)


def _change_of_basis(config, s: Setting, task: ol.TaskSpec):
  if s.basis_scale == 0:
    return None
  # Drawn once per c (shared by every learning rate and replicate).
  key = jax.random.fold_in(jax.random.fold_in(jax.random.key(config.seed), _BASIS_KEY),
                           int(round(s.basis_scale * 1000)))
  return ol.change_of_basis_matrix(key, s.n, s.basis_scale, jnp.dtype(task.real_dtype))


def _approaches_of(config, s: Setting) -> tuple[str, ...]:
  if s.approach == "baselines":
    return tuple(a for a in ol.BASELINES if a in config.approaches)
  return (s.approach,)


def _expected_keys(config, s: Setting):
  optimizer = "none" if s.approach == "baselines" else config.optimizer
  return [(s.n, a, r, optimizer, s.learning_rate, s.num_epochs, s.basis_scale)
          for a in _approaches_of(config, s) for r in range(config.num_replicates)]


def _run_setting(config, s: Setting, devices):
  task = _task(config, s.n)
  key = _setting_key(config, s.n)
  gens = tuple(config.generators)
  common = dict(n=s.n, field=config.field, learning_rate=s.learning_rate,
                num_epochs=s.num_epochs, basis_scale=s.basis_scale,
                num_replicates=config.num_replicates, dtype=config.dtype)
  results, curves = [], []
  if s.approach == "baselines":
    out = sweep.run_replicates(lambda r: ol.make_baselines(task)(key, r),
                               config.num_replicates, devices)
    for a in _approaches_of(config, s):
      for r in range(config.num_replicates):
        results.append(dict(common, approach=a, optimizer="none", replicate=r,
                            generator=gens[r % len(gens)], steps=0,
                            test_loss=float(out[a]["test_loss"][r]),
                            final_val_loss=float(out[a]["final_val_loss"][r])))
    return results, curves
  train = _train_spec(config, s)
  fn = ol.make_train(task, train, _change_of_basis(config, s, task))
  out = sweep.run_replicates(lambda r: fn(key, r), config.num_replicates, devices)
  val_steps = ol.validation_steps(train, task)
  for r in range(config.num_replicates):
    rec = dict(common, approach=s.approach, optimizer=config.optimizer, replicate=r,
               generator=gens[r % len(gens)], steps=int(val_steps[-1]),
               test_loss=float(out["test_loss"][r]),
               final_val_loss=float(out["final_val_loss"][r]))
    results.append(rec)
    curves.append(dict({k: rec[k] for k in KEY_FIELDS + ("generator",)},
                       val_steps=val_steps, val_loss=out["val_curve"][r]))
  return results, curves


def _label(s: Setting) -> str:
  if s.approach == "baselines":
    return f"n={s.n} baselines"
  extra = f" c={s.basis_scale:g}" if s.basis_scale else ""
  return f"n={s.n} {s.approach} epochs={s.num_epochs} lr={s.learning_rate:.3g}{extra}"


def run_experiment(config, workdir: str, devices=None, printer=print) -> int:
  """Validates the config, then runs (or resumes) every setting into `workdir`.

  Args:
    config: a `lie_unitary/experiments/operators/config.py` ConfigDict.
    workdir: output folder (created).
    devices: devices to shard replicates over; default all (`jax.devices()`).
    printer: progress lines.

  Returns:
    The number of settings computed in this call (0 when everything was done).

  Raises:
    ValueError: from `validate_config`, before any compute.
  """
  validate_config(config)
  # complex128 needs x64 for this run only: a context, not a global switch.
  with jax.enable_x64(config.dtype == "complex128" or bool(jax.config.jax_enable_x64)):
    return _run_validated(config, workdir, devices, printer)


def _run_validated(config, workdir, devices, printer) -> int:
  os.makedirs(workdir, exist_ok=True)
  if jax.process_index() == 0:
    with open(os.path.join(workdir, "config.json"), "w", encoding="utf-8") as f:
      json.dump(json.loads(config.to_json()), f, indent=1, sort_keys=True)
  todo = settings(config)
  claim = workers.claimer_from_env()
  if claim is not None:
    # Worker processes share the settings: longest first (epochs × n; the baselines
    # regenerate the training set once, about half an epoch), so that no long setting
    # starts alone at the end.
    todo = sorted(todo, key=lambda s: (s.num_epochs or 0.5) * s.n, reverse=True)
    prefix, base_printer = workers.worker_prefix(), printer
    printer = lambda line: base_printer(prefix + line)
  printer(f"{len(todo)} settings × {config.num_replicates} replicates on "
          f"{len(devices) if devices else jax.device_count()} device(s) → {workdir}")
  return sweep.run_settings(
      todo, label=_label, expected_keys=lambda s: _expected_keys(config, s),
      run=lambda s: _run_setting(config, s, devices),
      results_path=os.path.join(workdir, "results.jsonl"),
      curves_path=os.path.join(workdir, "curves.jsonl"), key_fields=KEY_FIELDS,
      claim=claim, printer=printer)

