"""The operator-learning family (paper §3): per n, a ``baselines`` unit and a unit per
(approach, basis scale, learning rate, seed), its replicates one vmapped program trained in
`make_trainer`'s pieces (or at once: `make_train`); records: docs/reproduction.md."""

import functools
import itertools
import math
import time
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lie_unitary import algebra
from lie_unitary import generators
from lie_unitary import parametrizations
from lie_unitary import principal_branch
from lie_unitary.experiments import fields as F
from lie_unitary.experiments import loop
from lie_unitary.experiments import optimizers
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.operators import config as config_lib
from lie_unitary.experiments.operators import data
from lie_unitary.experiments.operators import report
from lie_unitary.sequencing import after as _after

NAME = "operators"
_CHUNKS_PER_RUN = 20  # jitted calls per unit (bounded below by one validation interval)
_BASIS_KEY = 1_000_003  # fold_in tag of the change-of-basis matrices
_DEFAULTS = config_lib.defaults()
_SETTING = ("n", "approach", "num_epochs", "learning_rate", "basis_scale", "seed")  # a spec's


class TrainSpec(NamedTuple):
  """One training setting: `approach`, `num_epochs` and the config fields so named."""
  approach: str
  optimizer: str = _DEFAULTS.optimizer
  learning_rate: float = _DEFAULTS.learning_rate
  rmsprop_decay: float = _DEFAULTS.rmsprop_decay
  batch_size: int = _DEFAULTS.batch_size
  num_epochs: int = 1
  val_every: int = _DEFAULTS.val_every
  lr_schedule: str = _DEFAULTS.lr_schedule
  refresh_every: int = _DEFAULTS.refresh_every
  refresh_state: str = _DEFAULTS.refresh_state


class ReplicateState(NamedTuple):
  """What a replicate carries from one chunk of training to the next."""
  train: optimizers.TrainState  # parameters and optimizer state
  target: jax.Array  # (n, n)
  constants: dict  # the parametrization's fixed arrays (masks, permutations, the base)
  mask: dict  # the 0/1 gradient mask (ones for unrestricted parametrizations)


class Trainer(NamedTuple):
  """One replicate's training in pieces. A point: {val_loss, the λ chart's spectrum fields}."""
  init: Callable  # (replicate, key) -> (ReplicateState, initial point)
  epoch_data: Callable  # (replicate, state, key, epoch) -> (pair order, validation (x, y))
  # (replicate, state, epoch data, key, epoch, first, num) -> (state, points (num,)): the
  # validation intervals first..first+num-1 of `epoch` (num static under jit)
  chunk: Callable
  finish: Callable  # (replicate, state, key) -> dict(test_loss, final_val_loss)
  intervals_per_epoch: int
  num_epochs: int


def make_trainer(task: data.TaskSpec, train: TrainSpec, change_of_basis=None) -> Trainer:
  """One replicate's training as a `Trainer` (split anywhere, the same numbers), a refresh
  before each step s with s % refresh_every == 0; `change_of_basis`: appendix B's real
  (n², n²) M (λ = λ̃ᵀ M, λ̃ trained) or None. ValueError: a bad setting, named."""
  param = parametrizations.get_parametrization(train.approach)
  if param.is_orthogonal != (task.field == "real"):
    raise ValueError(f"approach {train.approach!r} does not fit field {task.field!r}.")
  if change_of_basis is not None and train.approach not in config_lib.BASIS_CHANGE_APPROACHES:
    raise ValueError(f"a change of basis needs an approach in "
                     f"{config_lib.BASIS_CHANGE_APPROACHES}; got {train.approach!r}.")
  if train.refresh_state not in principal_branch.REFRESH_STATES:
    raise ValueError(f"unknown refresh_state {train.refresh_state!r}; expected one of "
                     f"{principal_branch.REFRESH_STATES}.")
  if F.integer(0)(train.refresh_every):
    raise ValueError(f"refresh_every must be an integer ≥ 0; got {train.refresh_every!r}.")
  steps_per_epoch = task.num_train // train.batch_size
  if steps_per_epoch < 1 or steps_per_epoch % train.val_every:
    raise ValueError(
        f"steps per epoch (num_train // batch_size = {steps_per_epoch}) must be a positive "
        f"multiple of val_every = {train.val_every}.")
  intervals = steps_per_epoch // train.val_every
  rate = optimizers.schedule(train.lr_schedule, train.learning_rate,
                            total_steps=steps_per_epoch * train.num_epochs)
  optimizer = optimizers.make_optimizer(train.optimizer, rate, rmsprop_decay=train.rmsprop_decay)
  refresh_every = train.refresh_every if param.refresh is not None else 0
  # Steps run as blocks with a possible refresh before each: a refresh costs one
  # block boundary, not a branch inside every step.
  block = math.gcd(refresh_every, train.val_every) if refresh_every else train.val_every
  with_spectrum = not param.is_orthogonal and train.approach.startswith("lie_")

  def effective(params):  # what the parametrization sees: λ = λ̃ᵀ M under appendix B
    if change_of_basis is None:
      return params
    return {**params, "lam": algebra.change_basis(params["lam"], change_of_basis)}

  to_matrix = lambda params, constants: param.to_unitary(effective(params), constants)
  loss_fn = lambda params, constants, x, y: data.squared_error_loss(
      to_matrix(params, constants), x, y)

  def val_pairs(keys, target):
    indices = jnp.arange(min(task.val_subsample, task.num_val))
    return data.example_pairs(keys.val, indices, target, task)

  def point(params, constants, val):
    out = {"val_loss": loss_fn(params, constants, *val)}
    if with_spectrum:
      lam = effective(_after(params, out["val_loss"]))["lam"]
      out.update(zip(workdir_lib.SPECTRUM_FIELDS, principal_branch.spectrum_stats(lam)))
    return out

  def refresh(state, constants):
    params, constants = param.refresh(effective(state.params), constants)
    if change_of_basis is not None:  # such refreshes return λ = 0 (BASIS_CHANGE_APPROACHES)
      params = {**params, "lam": jnp.zeros_like(state.params["lam"])}
    opt_state = state.opt_state
    if train.refresh_state == "reset":
      opt_state = principal_branch.reset_optimizer_state(optimizer, opt_state, params)
    return optimizers.TrainState(params, opt_state), constants

  def init(replicate, key):
    keys = data.replicate_keys(key, replicate)
    target = data.make_target(keys.target, replicate % len(task.generators), task)
    params, constants = param.init(keys.init, task.n, data.dtypes(task)[0])
    params = _after(params, target)  # no LAPACK call overlaps another (`_after`)
    mask = param.gradient_mask(params, constants)
    initial = point(params, constants, val_pairs(keys, target))
    params = _after(params, initial)
    state = optimizers.TrainState(params, optimizer.init(params))
    return ReplicateState(state, target, constants, mask), initial

  def epoch_data(replicate, state, key, epoch):
    keys = data.replicate_keys(key, replicate)
    order = jax.random.permutation(jax.random.fold_in(keys.order, epoch), task.num_train)
    return order.astype(jnp.int32), val_pairs(keys, state.target)  # never stored

  def chunk(replicate, carry, this_epoch, key, epoch, first, num):
    keys, (epoch_order, val) = data.replicate_keys(key, replicate), this_epoch

    def run_block(sc, xs):  # a possible refresh, then `block` steps
      (state, constants), (idx_SxB, first_step) = sc, xs
      if refresh_every:
        state, constants = jax.lax.cond(first_step % refresh_every == 0, refresh,
                                        lambda s, c: (s, c), state, constants)

      def step(state, idx_B):
        x, y = data.example_pairs(keys.train, idx_B, carry.target, task)
        grads = jax.grad(loss_fn)(state.params, constants, x, y)
        grads = jax.tree.map(jnp.multiply, grads, carry.mask)  # lie_restricted: frozen entries
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        p = param.post_update(optax.apply_updates(state.params, updates), constants)
        return optimizers.TrainState(p, opt_state), None

      state, _ = jax.lax.scan(step, state, idx_SxB)
      return (state, constants), None

    def interval(sc, xs):  # val_every steps, then a point
      idx_SxB, index = xs
      first_step = index * train.val_every + block * jnp.arange(train.val_every // block)
      (state, constants), _ = jax.lax.scan(
          run_block, sc, (idx_SxB.reshape(-1, block, idx_SxB.shape[-1]), first_step))
      p = point(state.params, constants, val)
      return (_after(state, p), constants), p

    per_interval = train.val_every * train.batch_size
    order = jax.lax.dynamic_slice_in_dim(epoch_order, first * per_interval, num * per_interval)
    indices = epoch * intervals + first + jnp.arange(num)
    (state, constants), points = jax.lax.scan(
        interval, (carry.train, carry.constants),
        (order.reshape(num, train.val_every, -1), indices))
    return carry._replace(train=state, constants=constants), points

  def finish(replicate, carry, key):
    keys = data.replicate_keys(key, replicate)
    matrix = to_matrix(carry.train.params, carry.constants)
    loss = lambda k, num: data.dataset_loss(matrix, k, num, carry.target, task)
    return dict(test_loss=loss(keys.test, task.num_test),
                final_val_loss=loss(keys.val, task.num_val))

  return Trainer(init, epoch_data, chunk, finish, intervals, train.num_epochs)


def make_train(task: data.TaskSpec, train: TrainSpec,
               change_of_basis=None) -> Callable[[jax.Array, jax.Array], dict]:
  """`make_trainer`'s pieces as ``train_fn(key, replicate)`` -> test_loss, final_val_loss,
  params and the curves at steps 0, val_every, ... (val_curve, the spectrum fields)."""
  trainer = make_trainer(task, train, change_of_basis)

  def train_fn(key, replicate):
    state, initial = trainer.init(replicate, key)
    epoch = lambda s, e: trainer.chunk(
        replicate, s, trainer.epoch_data(replicate, s, key, e), key, e, 0,
        trainer.intervals_per_epoch)
    state, points = jax.lax.scan(epoch, state, jnp.arange(trainer.num_epochs))
    curves = {k: jnp.concatenate([initial[k][None], v.reshape(-1)]) for k, v in points.items()}
    return dict(trainer.finish(replicate, state, key), params=state.train.params,
                val_curve=curves.pop("val_loss"), **curves)

  return train_fn


def validate_config(config) -> None:
  """Raises runner.ConfigError naming the first bad field and its valid choices."""
  F.validate(config, config_lib.FIELDS)
  real = config.field == "real"
  if real and min(config.n_values) < 2:
    F.fail("n_values", config.n_values, "n ≥ 2 for SO(n) targets")
  allowed = tuple(a for a, p in parametrizations.PARAMETRIZATIONS.items()
                  if p.is_orthogonal == real) + config_lib.BASELINES
  wrong = [a for a in config.approaches if a not in allowed]
  if wrong:
    F.fail("approaches", config.approaches, f"approaches for field {config.field!r} from "
           f"{allowed} ({wrong[0]!r} is not)")
  gens = config_lib.REAL_GENERATORS if real else tuple(generators.GENERATORS)
  if any(g not in gens for g in config.generators):
    F.fail("generators", config.generators, f"generators for field {config.field!r} from {gens}")
  for small, large in (("batch_size", "num_train"), ("val_subsample", "num_val")):
    if config[small] > config[large]:
      F.fail(small, config[small], f"at most {large} = {config[large]}")
  steps = config.num_train // config.batch_size
  if steps % config.val_every:
    F.fail("val_every", config.val_every,
           f"a divisor of the steps per epoch num_train // batch_size = {steps}")
  fixed = set(config.approaches) - {*config_lib.BASELINES, *config_lib.BASIS_CHANGE_APPROACHES}
  if any(c > 0 for c in config.basis_scales) and fixed:
    F.fail("basis_scales", config.basis_scales,
           f"(0.0,): a change of basis applies to {config_lib.BASIS_CHANGE_APPROACHES} "
           f"only, and approaches = {tuple(config.approaches)}")
  units(config)  # an n without epochs


def units(config) -> list[F.Unit]:
  """The units of a validated `config`: smallest n first, baselines first at each n, then
  seed by seed; spec: n, approach (or "baselines"), num_epochs, learning_rate, basis_scale,
  seed. ConfigError: an n without epochs in num_epochs ((n, epochs) pairs, n = 0: the rest)."""
  baselines = tuple(a for a in config_lib.BASELINES if a in config.approaches)
  schedule = "" if config.lr_schedule == "constant" else f" {config.lr_schedule}"
  out, epochs = [], dict(config.num_epochs)
  if len(epochs) < len(config.num_epochs):  # dict() would keep an n's last entry
    F.fail("num_epochs", config.num_epochs, "one (n, epochs) per n, (0, e) for the rest")
  for n in config.n_values:
    if n not in epochs and 0 not in epochs:
      F.fail("num_epochs", config.num_epochs, f"an entry for n = {n} or a default (0, e)")
    settings = [("baselines", 0, 0.0, 0.0)] if baselines else []
    settings += [(a, epochs.get(n, epochs.get(0)), float(config.learning_rate) / float(d), float(c))
                 for a in config.approaches if a not in config_lib.BASELINES
                 for c in config.basis_scales for d in config.lr_divisors]
    for setting, seed in itertools.product(settings, config.seeds):
      s = F.resolved(zip(_SETTING, (n, *setting, seed)))
      fields = {"family": NAME, "n": n, "seed": seed, **F.identity(config, config_lib.FIELDS, s)}
      if s.approach == "baselines":
        name = f"n={n} baselines"
        fields.update(approach="baselines", baselines=baselines)
      else:
        name = (f"n={n} {s.approach} epochs={s.num_epochs} lr={s.learning_rate:.3g}"
                + (f" c={s.basis_scale:g}" if s.basis_scale else "") + schedule)
        fields.update(approach=s.approach, num_epochs=s.num_epochs,
                      learning_rate=s.learning_rate, basis_scale=s.basis_scale)
      # Cost ~ epochs · n (the baselines regenerate the training set: about half an epoch).
      out.append(F.Unit(name=name, fields=fields, cost=(s.num_epochs or 0.5) * n, spec=s,
                        target_step=s.num_epochs * (config.num_train // config.batch_size)))
  return out


def unit_specs(config, spec) -> tuple[data.TaskSpec, TrainSpec, jax.Array | None, jax.Array]:
  """A unit's (`data.TaskSpec`, `TrainSpec`, appendix B's change of basis, key): M ~ U(−c, c)
  of shape (n², n²), one per c (every learning rate and replicate share it), None for c = 0."""
  task = {f: config[f] for f in data.TaskSpec._fields if f in config}
  task = data.TaskSpec(**dict(task, n=spec.n, generators=tuple(config.generators),
                              real_dtype=config_lib.real_dtype(config.dtype)))
  train = {f: config[f] for f in TrainSpec._fields if f in config}
  train = TrainSpec(**dict(train, approach=spec.approach, learning_rate=spec.learning_rate,
                           num_epochs=spec.num_epochs))
  seed, c, m = jax.random.key(spec.seed), spec.basis_scale, None
  if c:
    key = jax.random.fold_in(jax.random.fold_in(seed, _BASIS_KEY), int(round(c * 1000)))
    m = jax.random.uniform(key, (spec.n ** 2, spec.n ** 2), jnp.dtype(task.real_dtype), -c, c)
  return task, train, m, jax.random.fold_in(seed, spec.n)


def run_unit(config, unit: F.Unit, ctx: runner.UnitContext) -> None:
  """Computes (or resumes) one unit's replicates, writing their records: a trained unit by
  `loop.train_unit` (raises loop.Interrupted on a stop), the baselines in one program."""
  # complex128 needs x64 for this unit only: a context, not a global switch.
  with jax.enable_x64(config.dtype == "complex128" or bool(jax.config.jax_enable_x64)):
    replicas = replicas_lib.Replicas(config.num_replicates)
    if unit.spec.approach != "baselines":
      return loop.train_unit(make_task(config, unit, replicas), ctx, replicas)
    start, gens = time.perf_counter(), config.generators
    task, _, _, key = unit_specs(config, unit.spec)
    fn = replicas.map(lambda r, k: data.make_baselines(task)(k, r), (0, None))
    out = replicas.gather(fn(replicas.ids, key))
    seconds = round(time.perf_counter() - start, 3)
    ctx.write([dict(kind="final", step=unit.target_step, approach=a, optimizer="none",
                    replicate=r, learning_rate=0.0, num_epochs=0, basis_scale=0.0,
                    generator=gens[r % len(gens)], **{k: float(v[r]) for k, v in out[a].items()},
                    seconds=seconds)
               for a in unit.fields["baselines"] for r in range(config.num_replicates)])


def make_task(config, unit: F.Unit, replicas) -> loop.Task:
  """A trained unit's `loop.Task`: calls of whole validation intervals (about
  1/_CHUNKS_PER_RUN of the run, dividing an epoch), the curves in the history."""
  gens, num = tuple(config.generators), config.num_replicates
  *specs, key = unit_specs(config, unit.spec)
  t = make_trainer(*specs)
  val_every, per_epoch = config.val_every, t.intervals_per_epoch
  want = max(1, math.ceil(per_epoch * t.num_epochs / _CHUNKS_PER_RUN))
  per_call = max(d for d in range(1, min(want, per_epoch) + 1) if per_epoch % d == 0)
  v_epoch_data = replicas.map(t.epoch_data, (0, 0, None, None))

  @functools.cache  # one program per number of validation intervals in a call
  def v_chunk(num_intervals):
    return replicas.map(functools.partial(t.chunk, num=num_intervals), (0, 0, 0, None, None, None))

  def init():
    state, initial = replicas.map(t.init, (0, None))(replicas.ids, key)
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
    out = replicas.gather(replicas.map(t.finish, (0, 0, None))(replicas.ids, state, key))
    curves = {k: np.asarray(c, np.float64) for k, c in history["curves"].items()}
    val_steps = np.arange(0, unit.target_step + 1, val_every)  # the curves' steps
    base = [dict(step=unit.target_step, approach=unit.spec.approach, replicate=r,
                 generator=gens[r % len(gens)]) for r in range(num)]
    return {workdir_lib.RESULTS: [dict(b, kind="final", **{k: float(v[r]) for k, v in out.items()})
                                  for r, b in enumerate(base)],
            workdir_lib.CURVES: [dict(b, kind="curve", val_steps=val_steps,
                                      **{k: c[:, r] for k, c in curves.items()})
                                 for r, b in enumerate(base)]}

  return loop.Task(init, train, evaluate, finish, unit.target_step, every=per_call * val_every,
                   epoch_steps=per_epoch * val_every, call_seconds=None)


write_report = report.write_report  # WORKDIR/report.md and figures; the paths written


def train_and_evaluate(config, workdir: str, **kwargs) -> runner.RunSummary:
  """Runs (or resumes) every unit of an operators config into `workdir` (keyword
  arguments: `runner.train_and_evaluate`'s).

  Raises:
    runner.ConfigError: a bad config field, before anything is written.
  """
  return runner.train_and_evaluate(NAME, config, workdir, **kwargs)
