"""The operator-learning task's training (paper §3): one replicate, in jittable pieces.

`make_trainer` gives one replicate's run as pure functions of PRNG keys, which the shared
loop (`lie_unitary.experiments.loop`) runs vmapped over replicates, with checkpoints
between calls; `make_train` chains them into one function. An epoch visits the training
pairs in a fresh order; the gradient is masked, stepped, then ``post_update`` runs.
"""

from __future__ import annotations

import math
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from lie_unitary import algebra
from lie_unitary import parametrizations
from lie_unitary import principal_branch
from lie_unitary.experiments import optimizers
from lie_unitary.experiments import workdir
from lie_unitary.experiments.operators import config as config_lib
from lie_unitary.experiments.operators import data
from lie_unitary.experiments.operators.data import TaskSpec
from lie_unitary.sequencing import after as _after

__all__ = ["EpochData", "ReplicateState", "TrainSpec", "Trainer", "make_train",
           "make_trainer", "optimizer_for"]

_DEFAULTS = config_lib.defaults()


class TrainSpec(NamedTuple):
  """One training setting: `approach` (a parametrization), `num_epochs`, and the config
  fields of the same names (meanings and defaults: `config.FIELDS`)."""
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


def optimizer_for(train: TrainSpec, total_steps: int | None = None
                  ) -> optax.GradientTransformation:
  """`train`'s optax optimizer (`lie_unitary.experiments.training`); `total_steps` (the
  run's) is needed by ``lr_schedule="cosine"``.

  Raises:
    ValueError: an unknown optimizer or schedule, or cosine without `total_steps`.
  """
  rate = optimizers.schedule(train.lr_schedule, train.learning_rate, total_steps)
  return optimizers.make_optimizer(train.optimizer, rate, rmsprop_decay=train.rmsprop_decay)


class ReplicateState(NamedTuple):
  """What a replicate carries from one chunk of training to the next."""
  train: optimizers.TrainState  # parameters and optimizer state
  target: jax.Array  # (n, n)
  constants: dict  # the parametrization's fixed arrays (masks, permutations, the base)
  mask: dict  # the 0/1 gradient mask (ones for unrestricted parametrizations)


class EpochData(NamedTuple):
  """What every chunk of one epoch reads: computed once per epoch, never stored."""
  order: jax.Array  # (num_train,) int32: the epoch's order of the training pairs
  val_x: jax.Array  # (val_subsample, n): the validation subsample
  val_y: jax.Array


class Trainer(NamedTuple):
  """One replicate's training, in pieces that run as separate jitted calls.

  Attributes:
    init: ``(key, replicate) -> (ReplicateState, initial point)``.
    epoch_data: ``(key, replicate, epoch, state) -> EpochData``, passed to each chunk.
    chunk: ``(state, data, key, replicate, epoch, first, num) -> (state, points)``:
      validation intervals first..first+num-1 of `epoch` (`num` static under jit).
    finish: ``(state, key, replicate) -> dict(test_loss, final_val_loss)`` on the
      full test and validation sets.
    intervals_per_epoch: validation intervals in one epoch.
    num_epochs: epochs.

  A point is a dict of scalars (``init``) or (num,) arrays (``chunk``): ``val_loss``
  and, for the complex λ approaches, `workdir.SPECTRUM_FIELDS` of the chart.
  """
  init: Callable
  epoch_data: Callable
  chunk: Callable
  finish: Callable
  intervals_per_epoch: int
  num_epochs: int


def make_trainer(task: TaskSpec, train: TrainSpec, change_of_basis=None) -> Trainer:
  """One replicate's training as a `Trainer`; split anywhere, the same numbers.

  A parametrization with a ``refresh`` is refreshed (U kept) before every step s with
  s % refresh_every == 0.

  Args:
    task: the `TaskSpec`.
    train: the `TrainSpec`.
    change_of_basis: appendix B's real (n², n²) M (trained λ̃, λ = λ̃ᵀ M), for
      `config.BASIS_CHANGE_APPROACHES` only; None: the standard basis.

  Raises:
    ValueError: an unknown approach, optimizer, schedule or refresh rule, an approach
      that does not fit the field or the change of basis, a negative refresh_every,
      or steps per epoch that do not split into validation intervals.
  """
  param = parametrizations.get_parametrization(train.approach)
  if param.is_orthogonal != (task.field == "real"):
    raise ValueError(f"approach {train.approach!r} does not fit field {task.field!r}.")
  if change_of_basis is not None and train.approach not in config_lib.BASIS_CHANGE_APPROACHES:
    raise ValueError(f"a change of basis needs an approach in "
                     f"{config_lib.BASIS_CHANGE_APPROACHES}; got {train.approach!r}.")
  if train.refresh_state not in principal_branch.REFRESH_STATES:
    raise ValueError(f"unknown refresh_state {train.refresh_state!r}; expected one of "
                     f"{principal_branch.REFRESH_STATES}.")
  if isinstance(train.refresh_every, bool) or not isinstance(train.refresh_every, int) or (
      train.refresh_every < 0):
    raise ValueError(f"refresh_every must be an integer ≥ 0; got {train.refresh_every!r}.")
  steps_per_epoch = task.num_train // train.batch_size
  if steps_per_epoch < 1 or steps_per_epoch % train.val_every:
    raise ValueError(
        f"steps per epoch (num_train // batch_size = {steps_per_epoch}) must be a positive "
        f"multiple of val_every = {train.val_every}.")
  intervals = steps_per_epoch // train.val_every
  optimizer = optimizer_for(train, total_steps=steps_per_epoch * train.num_epochs)
  refresh_every = train.refresh_every if param.refresh is not None else 0
  # Steps run as blocks with a possible refresh before each: a refresh costs one
  # block boundary, not a branch inside every step.
  block = math.gcd(refresh_every, train.val_every) if refresh_every else train.val_every
  with_spectrum = not param.is_orthogonal and train.approach.startswith("lie_")

  def effective(params):  # what the parametrization sees: λ = λ̃ᵀ M under appendix B
    if change_of_basis is None:
      return params
    return {**params, "lam": algebra.change_basis(params["lam"], change_of_basis)}

  def to_matrix(params, constants):
    return param.to_unitary(effective(params), constants)

  def loss_fn(params, constants, x, y):
    return data.squared_error_loss(to_matrix(params, constants), x, y)

  def val_pairs(keys, target):
    indices = jnp.arange(min(task.val_subsample, task.num_val))
    return data.example_pairs(keys.val, indices, target, task)

  def point(params, constants, val):
    out = {"val_loss": loss_fn(params, constants, *val)}
    if with_spectrum:
      lam = effective(_after(params, out["val_loss"]))["lam"]
      out.update(zip(workdir.SPECTRUM_FIELDS, principal_branch.spectrum_stats(lam)))
    return out

  def refresh(state, constants):
    params, constants = param.refresh(effective(state.params), constants)
    if change_of_basis is not None:  # such refreshes return λ = 0 (BASIS_CHANGE_APPROACHES)
      params = {**params, "lam": jnp.zeros_like(state.params["lam"])}
    opt_state = state.opt_state
    if train.refresh_state == "reset":
      opt_state = principal_branch.reset_optimizer_state(optimizer, opt_state, params)
    return optimizers.TrainState(params, opt_state), constants

  def init(key, replicate):
    keys = data.replicate_keys(key, replicate)
    target = data.make_target(keys.target, replicate % len(task.generators), task)
    params, constants = param.init(keys.init, task.n, data.dtypes(task)[0])
    params = _after(params, target)  # no LAPACK call overlaps another (`_after`)
    mask = param.gradient_mask(params, constants)
    initial = point(params, constants, val_pairs(keys, target))
    params = _after(params, initial)
    state = optimizers.TrainState(params, optimizer.init(params))
    return ReplicateState(state, target, constants, mask), initial

  def epoch_data(key, replicate, epoch, state):
    keys = data.replicate_keys(key, replicate)
    order = jax.random.permutation(jax.random.fold_in(keys.order, epoch), task.num_train)
    return EpochData(order.astype(jnp.int32), *val_pairs(keys, state.target))

  def chunk(carry, this_epoch, key, replicate, epoch, first, num):
    keys = data.replicate_keys(key, replicate)

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
      p = point(state.params, constants, (this_epoch.val_x, this_epoch.val_y))
      return (_after(state, p), constants), p

    per_interval = train.val_every * train.batch_size
    order = jax.lax.dynamic_slice_in_dim(this_epoch.order, first * per_interval, num * per_interval)
    indices = epoch * intervals + first + jnp.arange(num)
    (state, constants), points = jax.lax.scan(
        interval, (carry.train, carry.constants),
        (order.reshape(num, train.val_every, -1), indices))
    return carry._replace(train=state, constants=constants), points

  def finish(carry, key, replicate):
    keys = data.replicate_keys(key, replicate)
    matrix = to_matrix(carry.train.params, carry.constants)
    loss = lambda k, num: data.dataset_loss(matrix, k, num, carry.target, task)
    return dict(test_loss=loss(keys.test, task.num_test),
                final_val_loss=loss(keys.val, task.num_val))

  return Trainer(init, epoch_data, chunk, finish, intervals, train.num_epochs)


def make_train(task: TaskSpec, train: TrainSpec,
               change_of_basis=None) -> Callable[[jax.Array, jax.Array], dict]:
  """`make_trainer`'s pieces chained into ``train_fn(key, replicate)``; the same numbers.

  ``train_fn`` returns ``test_loss``, ``final_val_loss`` (scalars), the final ``params``
  and ``val_curve`` (C,) at steps 0, val_every, ... (C = 1 + steps / val_every), with
  the λ approaches' `workdir.SPECTRUM_FIELDS` at the same steps.

  Raises:
    ValueError: as `make_trainer`.
  """
  trainer = make_trainer(task, train, change_of_basis)

  def train_fn(key, replicate):
    state, initial = trainer.init(key, replicate)
    epoch = lambda s, e: trainer.chunk(
        s, trainer.epoch_data(key, replicate, e, s), key, replicate, e, 0,
        trainer.intervals_per_epoch)
    state, points = jax.lax.scan(epoch, state, jnp.arange(trainer.num_epochs))
    curves = {k: jnp.concatenate([initial[k][None], v.reshape(-1)]) for k, v in points.items()}
    return dict(trainer.finish(state, key, replicate), params=state.train.params,
                val_curve=curves.pop("val_loss"), **curves)

  return train_fn
