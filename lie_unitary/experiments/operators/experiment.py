"""The operator-learning family of the runner: config → units → records (paper §3).

`validate_config(config)` checks every field before anything is written and names
the bad one. `units(config)` lists the units of work: per n, one ``baselines``
unit (true, rand and the least-squares fit together) and one unit per (approach,
basis scale, learning rate), each covering every replicate as one vmapped program
sharded over all devices. A unit's identity (`lie_unitary.experiments.units`) hashes
every field that changes its numbers, so rerunning with another seed, noise level
or data size computes new units beside the old ones.

`run_unit` trains in chunks of validation intervals (one jitted call each), prints a
progress line at most every `_PROGRESS_SECONDS`, checkpoints the sharded state
(orbax) at most every `_CHECKPOINT_SECONDS` and on a stop request, and resumes from
the checkpoint after a crash. It writes

- ``WORKDIR/results.jsonl``: kind "final", one record per (approach, replicate) with
  ``test_loss``, ``final_val_loss``, ``step`` (training steps), ``seconds`` (wall
  time of the unit, all replicates together, compilation included), ``generator``
  and the unit's fields;
- ``WORKDIR/curves.jsonl``: kind "curve", the validation curve of each trained
  replicate (``val_steps``, ``val_loss``) and, for the λ approaches, the spectrum
  diagnostics at the same steps (``theta_spread``, ``theta_max_abs``, ``min_sinc``,
  ``wide_share``; `lie_unitary.principal_branch.spectrum_stats`).

Use it through `train_and_evaluate(config, workdir)` or the launcher
``python -m lie_unitary.experiments.operators --config=VARIANT --workdir=DIR``.
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import parametrizations
from lie_unitary.experiments import runner
from lie_unitary.experiments import sweep
from lie_unitary.experiments.operators import config as config_lib
from lie_unitary.experiments.operators import report
from lie_unitary.experiments.operators import task as ol
from lie_unitary.experiments.units import Unit

__all__ = ["NAME", "Setting", "epochs_for", "run_unit", "settings", "train_and_evaluate",
           "units", "validate_config", "write_report"]

NAME = "operators"
_COMPLEX_APPROACHES = ("lie_algebra", "lie_restricted", "arjovsky", "projection",
                       "lie_zero_init", "lie_haar_init", "lie_recentred", "lie_rebased",
                       "lie_rebased_orthonormal")
_REAL_APPROACHES = ("so_algebra", "projection_orthogonal")


class Setting(NamedTuple):
  """One unit of work: all replicates of one (n, approach, basis scale, lr)."""
  n: int
  approach: str  # a parametrization, or "baselines"
  num_epochs: int
  learning_rate: float
  basis_scale: float


def _fail(field, value, why):
  raise runner.ConfigError(f"config.{field} = {value!r}: {why}")


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
    runner.ConfigError: naming the first bad field (a key the config does not have,
      an unknown approach or generator, n < 1, step counts that do not divide, ...)
      and the valid choices.
  """
  known = set(config_lib.get_config("smoke").keys())
  unknown = sorted(set(config.keys()) - known)
  if unknown:
    raise runner.ConfigError(f"config has no field {unknown[0]!r}; the fields are "
                             f"{sorted(known)}.")
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
  if any(c > 0 for c in scales) and any(a not in ol.BASIS_CHANGE_APPROACHES for a in trained):
    _fail("basis_scales", config.basis_scales,
          f"a change of basis applies to {ol.BASIS_CHANGE_APPROACHES} only; "
          f"approaches = {approaches}.")
  if config.lr_schedule not in ol.LR_SCHEDULES:
    _fail("lr_schedule", config.lr_schedule, f"expected one of {ol.LR_SCHEDULES}.")
  if not _is_int(config.refresh_every) or config.refresh_every < 0:
    _fail("refresh_every", config.refresh_every, "expected an integer ≥ 0 (0: never).")
  if config.refresh_state not in ol.REFRESH_STATES:
    _fail("refresh_state", config.refresh_state, f"expected one of {ol.REFRESH_STATES}.")
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


_PROGRESS_SECONDS = 15.0  # at most one progress line per unit this often
_CHECKPOINT_SECONDS = 60.0  # a crash loses at most about this much of a unit
_CHUNKS_PER_RUN = 20  # jitted calls per unit (bounded below by one validation interval)
_BASIS_KEY = 1_000_003  # fold_in tag of the change-of-basis matrices

_TASK_FIELDS = ("field", "generators", "num_train", "num_val", "num_test", "val_subsample",
                "noise_std", "lie_target_std", "dtype", "seed", "num_replicates")
_TRAIN_FIELDS = ("optimizer", "rmsprop_decay", "batch_size", "val_every")


def _task(config, n) -> ol.TaskSpec:
  fields = {f: config[f] for f in ol.TaskSpec._fields if f in config}
  fields["generators"] = tuple(config.generators)
  return ol.TaskSpec(n=n, real_dtype="float64" if config.dtype == "complex128" else "float32",
                     **fields)


def _train_spec(config, s: Setting) -> ol.TrainSpec:
  fields = {f: config[f] for f in ol.TrainSpec._fields if f in config}
  fields.update(approach=s.approach, learning_rate=s.learning_rate, num_epochs=s.num_epochs,
                basis_scale=s.basis_scale)
  return ol.TrainSpec(**fields)


def _approaches_of(config, s: Setting) -> tuple[str, ...]:
  if s.approach == "baselines":
    return tuple(a for a in ol.BASELINES if a in config.approaches)
  return (s.approach,)


def _fields(config, s: Setting) -> dict:
  """Every setting that changes this unit's numbers (its identity).

  The schedule enters only when it is not "constant", and the refresh settings only
  for approaches that refresh: the identities of the units they do not concern stay
  what they were before these settings existed.
  """
  fields = {"family": NAME, "n": s.n, **{f: config[f] for f in _TASK_FIELDS}}
  fields["generators"] = tuple(config.generators)
  if s.approach == "baselines":
    return dict(fields, approach="baselines", baselines=_approaches_of(config, s))
  fields = dict(fields, **{f: config[f] for f in _TRAIN_FIELDS}, approach=s.approach,
                num_epochs=s.num_epochs, learning_rate=s.learning_rate,
                basis_scale=s.basis_scale)
  if config.lr_schedule != "constant":
    fields["lr_schedule"] = config.lr_schedule
  if parametrizations.get_parametrization(s.approach).refresh is not None:
    fields.update(refresh_every=config.refresh_every, refresh_state=config.refresh_state)
  return fields


def _steps(config, s: Setting) -> int:
  return s.num_epochs * (config.num_train // config.batch_size)


def units(config) -> list[Unit]:
  """The units of `config` (validated), smallest n first, baselines first at each n."""
  out = []
  for s in settings(config):
    # Cost ~ epochs · n (the baselines regenerate the training set: about half an epoch).
    out.append(Unit(name=_label(config, s), fields=_fields(config, s),
                    target_step=_steps(config, s), cost=(s.num_epochs or 0.5) * s.n, spec=s))
  return out


def _setting_key(config, n):
  return jax.random.fold_in(jax.random.key(config.seed), n)


def _change_of_basis(config, s: Setting, task: ol.TaskSpec):
  if s.basis_scale == 0:
    return None
  # Drawn once per c (shared by every learning rate and replicate).
  key = jax.random.fold_in(jax.random.fold_in(jax.random.key(config.seed), _BASIS_KEY),
                           int(round(s.basis_scale * 1000)))
  return ol.change_of_basis_matrix(key, s.n, s.basis_scale, jnp.dtype(task.real_dtype))


def _label(config, s: Setting) -> str:
  if s.approach == "baselines":
    return f"n={s.n} baselines"
  extra = f" c={s.basis_scale:g}" if s.basis_scale else ""
  if config.lr_schedule != "constant":
    extra += f" {config.lr_schedule}"
  return f"n={s.n} {s.approach} epochs={s.num_epochs} lr={s.learning_rate:.3g}{extra}"


def _per_call(intervals_per_epoch: int, total_intervals: int) -> int:
  """Validation intervals per jitted call: about 1/20 of the run, dividing an epoch."""
  want = max(1, math.ceil(total_intervals / _CHUNKS_PER_RUN))
  return max(d for d in range(1, intervals_per_epoch + 1)
             if intervals_per_epoch % d == 0 and d <= want)


def run_unit(config, unit: Unit, ctx: runner.UnitContext) -> None:
  """Computes one unit (all replicates), resuming from its checkpoint; writes records."""
  # complex128 needs x64 for this unit only: a context, not a global switch.
  with jax.enable_x64(config.dtype == "complex128" or bool(jax.config.jax_enable_x64)):
    start = time.perf_counter()
    s = unit.spec
    gens = tuple(config.generators)
    rmap = sweep.ReplicateMap(config.num_replicates)
    task = _task(config, s.n)
    key = _setting_key(config, s.n)
    common = dict(kind="final", step=unit.target_step)
    if s.approach == "baselines":
      out = rmap.gather(rmap(lambda r, k: ol.make_baselines(task)(k, r), key))
      seconds = time.perf_counter() - start
      ctx.write([dict(common, approach=a, optimizer="none", replicate=r, learning_rate=0.0,
                      num_epochs=0, basis_scale=0.0, generator=gens[r % len(gens)],
                      test_loss=float(out[a]["test_loss"][r]),
                      final_val_loss=float(out[a]["final_val_loss"][r]),
                      seconds=round(seconds, 3))
                 for a in _approaches_of(config, s) for r in range(config.num_replicates)])
      return
    train = _train_spec(config, s)
    trainer = _replicate_first(ol.make_trainer(task, train, _change_of_basis(config, s, task)))
    curves, state, elapsed = _train_chunks(config, unit, ctx, rmap, trainer, key)
    out = rmap.gather(rmap(trainer.finish, state, key, num_state=1))
    seconds = elapsed + time.perf_counter() - start
    val_steps = ol.validation_steps(train, task)
    ctx.write([dict(common, approach=s.approach, replicate=r, generator=gens[r % len(gens)],
                    test_loss=float(out["test_loss"][r]),
                    final_val_loss=float(out["final_val_loss"][r]), seconds=round(seconds, 3))
               for r in range(config.num_replicates)])
    ctx.write([dict(kind="curve", step=unit.target_step, approach=s.approach, replicate=r,
                    generator=gens[r % len(gens)], val_steps=val_steps,
                    **{k: c[:, r] for k, c in curves.items()})
               for r in range(config.num_replicates)], file="curves.jsonl")


def _replicate_first(t: ol.Trainer) -> ol.Trainer:
  """The trainer's pieces with the replicate index first, as `ReplicateMap` calls them."""
  return t._replace(
      init=lambda r, key: t.init(key, r),
      epoch_data=lambda r, state, key, epoch: t.epoch_data(key, r, epoch, state),
      chunk=lambda r, state, data, key, epoch, first, num: t.chunk(state, data, key, r, epoch,
                                                                   first, num),
      finish=lambda r, state, key: t.finish(state, key, r))


def _train_chunks(config, unit, ctx, rmap, trainer, key):
  """Runs every validation interval in jitted chunks; returns (curves {name: (C, R)},
  state, seconds spent before this process resumed)."""
  per_epoch = trainer.intervals_per_epoch
  total = per_epoch * trainer.num_epochs
  per_call = _per_call(per_epoch, total)
  state, initial = rmap(trainer.init, key)
  initial = rmap.gather(initial)
  curves = {k: np.full((total + 1, rmap.num_replicates), np.nan) for k in initial}
  for k, v in initial.items():
    curves[k][0] = v
  done, elapsed = 0, 0.0
  ckpt = ctx.checkpointer()
  try:
    if ckpt.latest_step() is not None:
      state, meta = ckpt.restore(state)
      done, elapsed = int(meta["intervals"]), float(meta["elapsed"])
      saved = meta["curve"]
      if not isinstance(saved, dict):  # written before the spectrum was logged
        saved = {"val_loss": saved}
      for k, v in saved.items():
        curves[k][:done + 1] = np.asarray(v, np.float64)
      ctx.printer(f"{unit.name}: resumed at step {done * config.val_every} "
                  f"({elapsed:.0f}s so far)")
    t0 = last_ckpt = last_line = time.perf_counter()

    def save():
      ckpt.save(done * config.val_every, state, {
          "intervals": done, "elapsed": elapsed + time.perf_counter() - t0,
          "curve": {k: np.where(np.isnan(c[:done + 1]), None, c[:done + 1]).tolist()
                    for k, c in curves.items()}})

    order, order_epoch = None, None
    while done < total:
      epoch, first = divmod(done, per_epoch)
      if order_epoch != epoch:  # once per epoch, not per chunk
        order = rmap(trainer.epoch_data, state, key, jnp.int32(epoch), num_state=1)
        order_epoch = epoch
      state, points = rmap(trainer.chunk, state, order, key, jnp.int32(epoch), jnp.int32(first),
                           num_state=2, static=(per_call,))
      for k, v in rmap.gather(points).items():
        curves[k][done + 1:done + 1 + per_call] = np.asarray(v).T
      for i in range(done + 1, done + 1 + per_call):
        ctx.scalars(i * config.val_every,
                    {f"{k}/median": np.median(c[i]) for k, c in curves.items()})
      done += per_call
      now = time.perf_counter()
      if now - last_line >= _PROGRESS_SECONDS and done < total:
        rate = (now - t0) / max(done, 1)
        spread = (f", θ spread median {np.median(curves['theta_spread'][done]):.3g}"
                  if "theta_spread" in curves else "")
        ctx.printer(f"{unit.name}: step {done * config.val_every}/{total * config.val_every}, "
                    f"val loss median {np.median(curves['val_loss'][done]):.4g}{spread}, "
                    f"ETA {(total - done) * rate:.0f}s")
        last_line = now
      if ctx.stop.requested() or (now - last_ckpt >= _CHECKPOINT_SECONDS and done < total):
        save()
        last_ckpt = now
        ctx.check_stop()
    # The trained state, for `lie_unitary.experiments.load_unit` (already there when a
    # run stopped between its last save and its records).
    if ckpt.latest_step() != done * config.val_every:
      save()
    return curves, state, elapsed
  finally:
    ckpt.close()


def write_report(workdir: str) -> list[str]:
  """Renders WORKDIR/report.md and the figures from the current results."""
  return report.write_report(workdir)


def train_and_evaluate(config, workdir: str, **kwargs) -> runner.RunSummary:
  """Runs (or resumes) every unit of a learn-unitary config into `workdir`.

  Keyword arguments go to `lie_unitary.experiments.runner.train_and_evaluate`
  (num_workers, printer, tensorboard, handle_signals).

  Raises:
    runner.ConfigError: a bad config field, before anything is written.
  """
  import sys
  return runner.train_and_evaluate(sys.modules[__name__], config, workdir, **kwargs)
