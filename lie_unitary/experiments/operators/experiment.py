"""The operator-learning family of the runner (paper §3): config → units → records.

Per n, one ``baselines`` unit (true, rand, lstsq, procrustes) and one unit per (approach,
basis scale, learning rate), all replicates as one vmapped program. `run_unit` writes
"final" records (results.jsonl) and "curve" records (curves.jsonl); fields:
docs/reproduction.md.
"""

from __future__ import annotations

import functools
import math
import sys
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import generators
from lie_unitary.experiments import fields as F
from lie_unitary.experiments import loop
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.fields import Unit
from lie_unitary.experiments.operators import config as config_lib
from lie_unitary.experiments.operators import data
from lie_unitary.experiments.operators import report
from lie_unitary.experiments.operators import trainer as trainer_lib

__all__ = ["NAME", "Setting", "epochs_for", "make_task", "run_unit", "task_spec",
           "train_and_evaluate", "train_spec", "units", "validate_config", "write_report"]

NAME = "operators"
_CHUNKS_PER_RUN = 20  # jitted calls per unit (bounded below by one validation interval)
_BASIS_KEY = 1_000_003  # fold_in tag of the change-of-basis matrices


class Setting(NamedTuple):
  """One unit of work: all replicates of one (n, approach, basis scale, lr, seed)."""
  n: int
  approach: str  # a parametrization, or "baselines"
  num_epochs: int
  learning_rate: float
  basis_scale: float
  seed: int = 0


def epochs_for(config, n: int) -> int:
  """Epochs at size n from ``config.num_epochs`` ((n, epochs) pairs; n = 0: the default).

  Raises:
    ConfigError: no entry for n and no default.
  """
  table = {int(k): int(e) for k, e in config.num_epochs}
  for k in (n, 0):
    if k in table:
      return table[k]
  F.fail("num_epochs", config.num_epochs, f"an entry for n = {n} or a default (0, e)")


def validate_config(config) -> None:
  """Checks every field of an operators config.

  Raises:
    runner.ConfigError: naming the first bad field (an unknown key, approach or
      generator, n < 1, steps that do not divide, ...) and the valid choices.
  """
  F.validate(config, config_lib.FIELDS)
  real = config.field == "real"
  if real and min(config.n_values) < 2:
    F.fail("n_values", config.n_values, "n ≥ 2 for SO(n) targets")
  allowed = config_lib.approaches(config.field) + config_lib.BASELINES
  wrong = [a for a in config.approaches if a not in allowed]
  if wrong:
    F.fail("approaches", config.approaches, f"approaches for field {config.field!r} from "
           f"{allowed} ({wrong[0]!r} is not)")
  gens = config_lib.REAL_GENERATORS if real else tuple(generators.GENERATORS)
  if any(g not in gens for g in config.generators):
    F.fail("generators", config.generators, f"generators for field {config.field!r} from "
           f"{gens}")
  if config.batch_size > config.num_train:
    F.fail("batch_size", config.batch_size, f"at most num_train = {config.num_train}")
  steps = config.num_train // config.batch_size
  if steps % config.val_every:
    F.fail("val_every", config.val_every,
           f"a divisor of the steps per epoch num_train // batch_size = {steps}")
  for n in config.n_values:
    epochs_for(config, n)
  trained = [a for a in config.approaches if a not in config_lib.BASELINES]
  if (any(c > 0 for c in config.basis_scales)
      and any(a not in config_lib.BASIS_CHANGE_APPROACHES for a in trained)):
    F.fail("basis_scales", config.basis_scales,
           f"(0.0,): a change of basis applies to {config_lib.BASIS_CHANGE_APPROACHES} "
           f"only, and approaches = {tuple(config.approaches)}")


def units(config) -> list[Unit]:
  """The units of a validated `config`, smallest n first, baselines first at each n, then
  seed by seed; a unit's identity: the fields of `config.FIELDS` whose rule holds for it,
  and its own setting."""
  baselines = tuple(a for a in config_lib.BASELINES if a in config.approaches)
  schedule = "" if config.lr_schedule == "constant" else f" {config.lr_schedule}"
  out = []
  for n in config.n_values:
    epochs = epochs_for(config, n)
    settings = [Setting(n, "baselines", 0, 0.0, 0.0)] if baselines else []
    settings += [Setting(n, a, epochs, float(config.learning_rate) / float(d), float(c))
                 for a in config.approaches if a not in config_lib.BASELINES
                 for c in config.basis_scales for d in config.lr_divisors]
    for s in (s._replace(seed=seed) for s in settings for seed in config.seeds):
      fields = {"family": NAME, "n": n, "seed": s.seed,
                **F.identity(config, config_lib.FIELDS, s)}
      if s.approach == "baselines":
        name = f"n={n} baselines"
        fields.update(approach="baselines", baselines=baselines)
      else:
        name = (f"n={n} {s.approach} epochs={s.num_epochs} lr={s.learning_rate:.3g}"
                + (f" c={s.basis_scale:g}" if s.basis_scale else "") + schedule)
        fields.update(approach=s.approach, num_epochs=s.num_epochs,
                      learning_rate=s.learning_rate, basis_scale=s.basis_scale)
      # Cost ~ epochs · n (the baselines regenerate the training set: about half an epoch).
      out.append(Unit(name=name, fields=fields, cost=(s.num_epochs or 0.5) * n,
                      spec=F.resolved(s._asdict()),
                      target_step=s.num_epochs * (config.num_train // config.batch_size)))
  return out


def task_spec(config, n: int) -> data.TaskSpec:
  """The `data.TaskSpec` of size n under `config`."""
  fields = {f: config[f] for f in data.TaskSpec._fields if f in config}
  fields["generators"] = tuple(config.generators)
  return data.TaskSpec(n=n, real_dtype=config_lib.real_dtype(config.dtype), **fields)


def train_spec(config, s: Setting) -> trainer_lib.TrainSpec:
  """The `trainer.TrainSpec` of a trained unit's setting under `config`."""
  fields = {f: config[f] for f in trainer_lib.TrainSpec._fields if f in config}
  fields.update(approach=s.approach, learning_rate=s.learning_rate, num_epochs=s.num_epochs)
  return trainer_lib.TrainSpec(**fields)


def _setting_key(s: Setting):  # replicate r's keys fold r into it (`data.replicate_keys`)
  return jax.random.fold_in(jax.random.key(s.seed), s.n)


def _change_of_basis(config, s: Setting, task: data.TaskSpec):
  """Appendix B's (n², n²) M ~ U(−c, c), one per c (every learning rate and replicate
  share it); None for c = 0."""
  if s.basis_scale == 0:
    return None
  key = jax.random.fold_in(jax.random.fold_in(jax.random.key(s.seed), _BASIS_KEY),
                           int(round(s.basis_scale * 1000)))
  return jax.random.uniform(key, (s.n * s.n, s.n * s.n), jnp.dtype(task.real_dtype),
                            -s.basis_scale, s.basis_scale)


def run_unit(config, unit: Unit, ctx: runner.UnitContext) -> None:
  """Computes one unit (all replicates), resuming from its checkpoint; writes records.

  Raises:
    loop.Interrupted: after a checkpoint, when a stop was requested.
  """
  # complex128 needs x64 for this unit only: a context, not a global switch.
  with jax.enable_x64(config.dtype == "complex128" or bool(jax.config.jax_enable_x64)):
    replicas = replicas_lib.Replicas(config.num_replicates)
    if unit.spec.approach == "baselines":
      _run_baselines(config, unit, ctx, replicas)
    else:
      loop.train_unit(make_task(config, unit, replicas), ctx, replicas)


def _run_baselines(config, unit: Unit, ctx: runner.UnitContext, replicas) -> None:
  """The baselines unit: one program, no training (so no checkpoint)."""
  start, s, num = time.perf_counter(), unit.spec, config.num_replicates
  gens = tuple(config.generators)
  baselines = replicas.map(lambda r, k: data.make_baselines(task_spec(config, s.n))(k, r),
                           (0, None))
  out = replicas.gather(baselines(replicas.ids, _setting_key(s)))
  ctx.write([dict(kind="final", step=unit.target_step, approach=a, optimizer="none",
                  replicate=r, learning_rate=0.0, num_epochs=0, basis_scale=0.0,
                  generator=gens[r % len(gens)], test_loss=float(out[a]["test_loss"][r]),
                  final_val_loss=float(out[a]["final_val_loss"][r]),
                  seconds=round(time.perf_counter() - start, 3))
             for a in unit.fields["baselines"] for r in range(num)])


def make_task(config, unit: Unit, replicas) -> loop.Task:
  """A trained unit's `loop.Task`: calls of whole validation intervals (about
  1/_CHUNKS_PER_RUN of the run, dividing an epoch); the history holds the validation
  curves, whose points the calls return; "final" and "curve" records at the end."""
  s, gens, num = unit.spec, tuple(config.generators), config.num_replicates
  task = task_spec(config, s.n)
  key = _setting_key(s)
  t = trainer_lib.make_trainer(task, train_spec(config, s), _change_of_basis(config, s, task))
  val_every, per_epoch = config.val_every, t.intervals_per_epoch
  want = max(1, math.ceil(per_epoch * t.num_epochs / _CHUNKS_PER_RUN))
  per_call = max(d for d in range(1, min(want, per_epoch) + 1) if per_epoch % d == 0)
  v_init = replicas.map(lambda r, k: t.init(k, r), (0, None))
  v_epoch_data = replicas.map(lambda r, st, k, e: t.epoch_data(k, r, e, st), (0, 0, None, None))
  v_finish = replicas.map(lambda r, st, k: t.finish(st, k, r), (0, 0, None))

  @functools.cache  # one program per number of validation intervals in a call
  def v_chunk(num_intervals):
    return replicas.map(lambda r, st, d, k, e, first: t.chunk(st, d, k, r, e, first,
                                                               num_intervals),
                        (0, 0, 0, None, None, None))

  def init():
    state, initial = v_init(replicas.ids, key)
    return state, {"curves": {k: [np.asarray(v, np.float64).tolist()]
                              for k, v in replicas.gather(initial).items()}}

  epoch_data = {}  # {epoch: its pair order}: once per epoch, never stored

  def train(state, history, step, num_steps):
    epoch, first = divmod(step // val_every, per_epoch)
    if epoch not in epoch_data:
      epoch_data.clear()
      epoch_data[epoch] = v_epoch_data(replicas.ids, state, key, jnp.int32(epoch))
    state, points = v_chunk(num_steps // val_every)(
        replicas.ids, state, epoch_data[epoch], key, jnp.int32(epoch), jnp.int32(first))
    for k, v in replicas.gather(points).items():
      history["curves"][k].extend(np.asarray(v, np.float64).T.tolist())
    return state, history

  def evaluate(state, history, step):  # the calls computed the points: the line's only
    last = {k: np.asarray(c[-1]) for k, c in history["curves"].items()}
    spread = (f", θ spread median {loop.median(last['theta_spread']):.3g}"
              if "theta_spread" in last else "")
    return [], history, f"val loss median {loop.median(last['val_loss']):.4g}{spread}"

  def finish(state, history):
    out = replicas.gather(v_finish(replicas.ids, state, key))
    curves = {k: np.asarray(c, np.float64) for k, c in history["curves"].items()}
    val_steps = np.arange(0, unit.target_step + 1, val_every)  # the curves' steps
    common = lambda r: dict(step=unit.target_step, approach=s.approach, replicate=r,
                            generator=gens[r % len(gens)])
    return {workdir_lib.RESULTS: [dict(common(r), kind="final",
                                       test_loss=float(out["test_loss"][r]),
                                       final_val_loss=float(out["final_val_loss"][r]))
                                  for r in range(num)],
            workdir_lib.CURVES: [dict(common(r), kind="curve", val_steps=val_steps,
                                      **{k: c[:, r] for k, c in curves.items()})
                                 for r in range(num)]}

  return loop.Task(init, train, evaluate, finish, unit.target_step, every=per_call * val_every,
                   epoch_steps=per_epoch * val_every, call_seconds=None)


write_report = report.write_report  # WORKDIR/report.md and figures; the paths written


def train_and_evaluate(config, workdir: str, **kwargs) -> runner.RunSummary:
  """Runs (or resumes) every unit of an operators config into `workdir`; keyword arguments
  go to `runner.train_and_evaluate`.

  Raises:
    runner.ConfigError: a bad config field, before anything is written.
  """
  return runner.train_and_evaluate(sys.modules[__name__], config, workdir, **kwargs)
