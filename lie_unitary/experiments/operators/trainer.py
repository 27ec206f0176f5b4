"""The operator-learning task's training (paper §3): one replicate, in jittable pieces.

`make_trainer(task, train)` returns one replicate's run as pure functions of PRNG keys
(init / epoch data / chunk / finish) that the shared loop
(`lie_unitary.experiments.loop`) runs as separate jitted calls, vmapped over the
replicates, with checkpoints between them. An epoch visits the `num_train` pairs
(`data.example_pairs`) in a fresh random order, in batches; the gradient is multiplied
by the parametrization's 0/1 mask before the optimizer, then ``post_update`` runs
(e.g. the polar projection). `make_train` chains the pieces into one function.

Shape letters: B batch, N = n, S steps.
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
from lie_unitary.experiments import training
from lie_unitary.experiments import workdir
from lie_unitary.experiments.operators import config as config_lib
from lie_unitary.experiments.operators import data
from lie_unitary.experiments.operators import defaults
from lie_unitary.experiments.operators.data import TaskSpec
from lie_unitary.sequencing import after as _after

__all__ = ["EpochData", "ReplicateState", "SPECTRUM_FIELDS", "TrainSpec", "Trainer",
           "make_train", "make_trainer", "optimizer_for"]

# The spectrum diagnostics of the λ chart logged beside the validation loss.
SPECTRUM_FIELDS = workdir.SPECTRUM_FIELDS
_DEFAULTS = defaults.get_config()


class TrainSpec(NamedTuple):
  """Static description of one training setting: `approach` (a parametrization,
  `lie_unitary.PARAMETRIZATIONS`), `num_epochs`, and the config fields of the same
  names (their meanings and defaults: `defaults.get_config()`)."""
  approach: str
  optimizer: str = _DEFAULTS.optimizer  # "sgd" or "rmsprop"
  learning_rate: float = _DEFAULTS.learning_rate
  rmsprop_decay: float = _DEFAULTS.rmsprop_decay
  batch_size: int = _DEFAULTS.batch_size
  num_epochs: int = 1
  val_every: int = _DEFAULTS.val_every  # steps between validation points
  lr_schedule: str = _DEFAULTS.lr_schedule  # "constant" or "cosine" (to 0 over the run)
  refresh_every: int = _DEFAULTS.refresh_every
  refresh_state: str = _DEFAULTS.refresh_state  # the optimizer's moments: "keep", "reset"


def optimizer_for(train: TrainSpec, total_steps: int | None = None
                  ) -> optax.GradientTransformation:
  """optax SGD (as the paper ran it) or RMSProp (no momentum) at `train`'s rate and
  schedule (`lie_unitary.experiments.training`).

  Args:
    train: the `TrainSpec`.
    total_steps: steps of the whole run (needed by ``lr_schedule="cosine"``).

  Raises:
    ValueError: for an unknown optimizer or schedule, or a cosine schedule without
      `total_steps`.
  """
  rate = training.schedule(train.lr_schedule, train.learning_rate, total_steps)
  return training.make_optimizer(train.optimizer, rate, rmsprop_decay=train.rmsprop_decay)


class ReplicateState(NamedTuple):
  """What a replicate carries from one chunk of training to the next."""
  train: training.TrainState  # parameters and optimizer state
  target: jax.Array  # (n, n)
  constants: dict  # the parametrization's fixed arrays (masks, permutations, the base)
  mask: dict  # the 0/1 gradient mask (ones for unrestricted parametrizations)


class EpochData(NamedTuple):
  """What every chunk of one epoch reads: computed once per epoch, never stored."""
  order: jax.Array  # (num_train,) int32: the epoch's order of the training pairs
  val_x: jax.Array  # (val_subsample, n): the validation subsample
  val_y: jax.Array


class Trainer(NamedTuple):
  """One replicate's training, in pieces that can run as separate jitted calls.

  Attributes:
    init: ``(key, replicate) -> (ReplicateState, initial point)``.
    epoch_data: ``(key, replicate, epoch, state) -> EpochData``: the epoch's order of
      the training pairs and the validation subsample, passed to every chunk of it
      (a permutation of 10⁶ pairs costs more than a chunk's steps at small n).
    chunk: ``(state, data, key, replicate, epoch, first, num) -> (state, points)``:
      validation intervals first..first+num-1 of `epoch` (each `val_every` steps,
      then the subsample validation loss). `num` must be static under jit.
    finish: ``(state, key, replicate) -> dict(test_loss, final_val_loss)`` on the
      full test and validation sets.
    intervals_per_epoch: validation intervals in one epoch.
    num_epochs: epochs.

  A *point* is a dict of scalars (``init``) or (num,) arrays (``chunk``): ``val_loss``
  and, for the λ approaches, the spectrum diagnostics of the chart the gradient
  passes through (`SPECTRUM_FIELDS`; `principal_branch.spectrum_stats`).
  """
  init: Callable
  epoch_data: Callable
  chunk: Callable
  finish: Callable
  intervals_per_epoch: int
  num_epochs: int


def make_trainer(task: TaskSpec, train: TrainSpec, change_of_basis=None) -> Trainer:
  """Builds one replicate's training as init / epoch data / chunk / finish functions.

  `init` draws the target and the initial parameters; the state carries them, so the
  pieces can run as separate programs (with a checkpoint between them) and give the
  numbers of one uninterrupted run. A parametrization with a ``refresh``
  (re-centring, re-basing) is refreshed before every step s with
  s % refresh_every == 0; the refresh keeps U and changes the coordinates (and the
  base held in ``ReplicateState.constants``).

  Args:
    task: the `TaskSpec`.
    train: the `TrainSpec`.
    change_of_basis: appendix B only: real (n², n²) M, with the trained λ̃ mapped to
      λ = λ̃ᵀ M; requires an approach in `config.BASIS_CHANGE_APPROACHES`. None: the
      standard basis.

  Returns:
    A `Trainer`.

  Raises:
    ValueError: for an unknown approach, optimizer, schedule or refresh rule, an
      approach that does not fit the field or the change of basis, a negative
      refresh_every, or a step count that does not split into validation intervals.
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
      out.update(zip(SPECTRUM_FIELDS, principal_branch.spectrum_stats(lam)))
    return out

  def refresh(state, constants):
    params, constants = param.refresh(effective(state.params), constants)
    if change_of_basis is not None:  # such refreshes return λ = 0 (BASIS_CHANGE_APPROACHES)
      params = {**params, "lam": jnp.zeros_like(state.params["lam"])}
    opt_state = state.opt_state
    if train.refresh_state == "reset":
      opt_state = principal_branch.reset_optimizer_state(optimizer, opt_state, params)
    return training.TrainState(params, opt_state), constants

  def init(key, replicate):
    keys = data.replicate_keys(key, replicate)
    target = data.make_target(keys.target, replicate % len(task.generators), task)
    params, constants = param.init(keys.init, task.n, data.dtypes(task)[0])
    params = _after(params, target)  # no LAPACK call overlaps another (`_after`)
    mask = param.gradient_mask(params, constants)
    initial = point(params, constants, val_pairs(keys, target))
    params = _after(params, initial)
    state = training.TrainState(params, optimizer.init(params))
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
        return training.TrainState(p, opt_state), None

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
  """One replicate's whole run as one pure function of (key, replicate): `make_trainer`'s
  pieces, the epochs in one ``lax.scan``; the same numbers.

  Returns:
    ``train_fn(key, replicate)`` (the task's key per n, an int32 replicate) returning
    ``test_loss`` and ``final_val_loss`` (scalars), ``params`` (the final ones),
    ``val_curve`` (C,): the subsample validation loss at steps 0, val_every, ...
    (C = 1 + num_epochs·steps_per_epoch/val_every), and for the λ approaches the
    `SPECTRUM_FIELDS` at the same steps, each (C,).

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
