"""The operator-learning task's training (paper §3): one replicate, in jittable pieces.

Everything here is a pure function of PRNG keys, written for ONE replicate and
batched by the caller with `jax.vmap` (see `lie_unitary.experiments.replicas`):

- An epoch is a pass over the fixed set of `num_train` pairs (`data.example_pairs`)
  in a fresh random order (a permutation drawn per epoch), in batches.
- `make_trainer(task, train)` returns the run as pieces (init / epoch data / chunk /
  finish) that the shared loop (`lie_unitary.experiments.loop`) runs as separate jitted
  calls with checkpoints between them; `make_train(task, train)` returns the whole
  run as ONE function ``train_fn(key, replicate) -> dict``: draws the target,
  initialises the parametrization, runs ``lax.scan`` over epochs × validation chunks ×
  steps (the gradient is multiplied by the parametrization's 0/1 mask BEFORE the
  optimizer, then ``post_update`` runs, e.g. the polar projection), logs the
  validation loss on a fixed subsample every `val_every` steps, and ends with the
  losses on the full validation and test sets. Both give the same numbers.

Shape letters: B batch, N = n, P pairs, C validation points, E epochs.
"""

from __future__ import annotations

import math
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lie_unitary import algebra
from lie_unitary import parametrizations
from lie_unitary import principal_branch
from lie_unitary.experiments import training
from lie_unitary.experiments import workdir
from lie_unitary.experiments.operators import config as config_lib
from lie_unitary.experiments.operators import data
from lie_unitary.experiments.operators.data import TaskSpec
from lie_unitary.sequencing import after as _after

__all__ = ["EpochData", "ReplicateState", "SPECTRUM_FIELDS", "TrainSpec", "Trainer",
           "make_train", "make_trainer", "optimizer_for", "validation_steps"]

# The spectrum diagnostics of the λ chart logged beside the validation loss.
SPECTRUM_FIELDS = workdir.SPECTRUM_FIELDS
_DEFAULTS = config_lib.defaults()


class TrainSpec(NamedTuple):
  """Static description of one training setting. Defaults: the family's config
  defaults (`config.FIELDS`).

  Attributes:
    approach: a parametrization name (`lie_unitary.PARAMETRIZATIONS`).
    optimizer: "sgd" or "rmsprop".
    learning_rate: step size.
    rmsprop_decay: RMSProp's decay of the squared-gradient average.
    batch_size: pairs per step.
    num_epochs: passes over the training pairs.
    val_every: steps between validation-loss points (divides steps per epoch).
    basis_scale: appendix B: 0 for the standard basis, else c > 0 with the trained
      coefficients λ̃ mapped to λ = λ̃ᵀ M (for "lie_algebra", "lie_zero_init" and
      "lie_rebased"); M is passed to `make_train`.
    lr_schedule: "constant", or "cosine": the rate decays from `learning_rate` to 0
      over all steps as optax.cosine_decay_schedule.
    refresh_every: K, for parametrizations with a ``refresh`` (lie_recentred,
      lie_rebased): the refresh runs before every step s with s % K == 0 (s = 0
      included); 0 = never. Ignored by the others.
    refresh_state: what a refresh does to the optimizer's moments: "keep" them or
      "reset" them (`principal_branch.reset_optimizer_state`; step counts are kept).
  """
  approach: str
  optimizer: str = _DEFAULTS.optimizer
  learning_rate: float = _DEFAULTS.learning_rate
  rmsprop_decay: float = _DEFAULTS.rmsprop_decay
  batch_size: int = _DEFAULTS.batch_size
  num_epochs: int = 1
  val_every: int = _DEFAULTS.val_every
  basis_scale: float = 0.0
  lr_schedule: str = _DEFAULTS.lr_schedule
  refresh_every: int = _DEFAULTS.refresh_every
  refresh_state: str = _DEFAULTS.refresh_state


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


def _effective(params, change):
  """The parameters the parametrization sees: λ = λ̃ᵀ M under a change of basis."""
  if change is None:
    return params
  return {**params, "lam": algebra.change_basis(params["lam"], change)}


def _to_matrix_fn(param, constants, change):
  return lambda p: param.to_unitary(_effective(p, change), constants)


def _spectrum(params, change) -> dict:
  """Spectrum diagnostics of the λ chart (`principal_branch.spectrum_stats`)."""
  stats = principal_branch.spectrum_stats(_effective(params, change)["lam"])
  return dict(zip(SPECTRUM_FIELDS, stats))


class ReplicateState(NamedTuple):
  """What a replicate carries from one chunk of training to the next.

  Attributes:
    train: parameters and optimizer state.
    target: the (n, n) target matrix.
    constants: the parametrization's fixed arrays (masks, permutations).
    mask: the 0/1 gradient mask (ones for unrestricted parametrizations).
  """
  train: training.TrainState
  target: jax.Array
  constants: dict
  mask: dict


class EpochData(NamedTuple):
  """What every chunk of one epoch reads: computed once per epoch, never stored.

  Attributes:
    order: (num_train,) int32, the epoch's order of the training pairs.
    val_x, val_y: the validation subsample's pairs (val_subsample, n).
  """
  order: jax.Array
  val_x: jax.Array
  val_y: jax.Array


class Trainer(NamedTuple):
  """One replicate's training, in pieces that can run as separate jitted calls.

  Attributes:
    init: ``(key, replicate) -> (ReplicateState, initial point)``.
    epoch_data: ``(key, replicate, epoch, state) -> EpochData``: the order in which `epoch`
      visits the training pairs (a permutation drawn from the replicate's key) and
      the validation subsample. Computed once per epoch and passed to every chunk of
      it: a permutation of 10⁶ pairs, or 10⁴ regenerated pairs, cost more than a
      chunk's steps at small n.
    chunk: ``(state, data, key, replicate, epoch, first, num) -> (state, points)``:
      validation intervals first..first+num-1 of `epoch` (each `val_every` steps,
      then the subsample validation loss), `data` being that epoch's `epoch_data`.
      `num` must be static under jit.
    finish: ``(state, key, replicate) -> dict(test_loss, final_val_loss)`` on the
      full test and validation sets.
    intervals_per_epoch: validation intervals in one epoch.
    num_epochs: epochs.

  A *point* is a dict of scalars (``init``) or (num,) arrays (``chunk``):
  ``val_loss``, and for the λ approaches the spectrum diagnostics of the chart that
  the gradient passes through (`SPECTRUM_FIELDS`: θ's spread, max |θ|, smallest
  |sinc(Δ/2)| and the share of gaps |Δ| > π; `principal_branch.spectrum_stats`).
  """
  init: Callable
  epoch_data: Callable
  chunk: Callable
  finish: Callable
  intervals_per_epoch: int
  num_epochs: int


def make_trainer(task: TaskSpec, train: TrainSpec, change_of_basis=None) -> Trainer:
  """Builds one replicate's training as init / chunk / finish pure functions.

  `init` draws the target and the initial parameters; the state it returns carries
  them, so the pieces can run as separate programs (with a checkpoint of the state
  between them) and give the numbers of one uninterrupted run. A parametrization
  with a ``refresh`` (re-centring, re-basing) is refreshed before every step s with
  s % refresh_every == 0; the refresh keeps U and changes the coordinates (and the
  base held in ``ReplicateState.constants``).

  Args:
    task: the `TaskSpec`.
    train: the `TrainSpec`.
    change_of_basis: appendix B only: real (n², n²) M, with the trained λ̃ mapped to
      λ = λ̃ᵀ M; requires an approach in `config_lib.BASIS_CHANGE_APPROACHES`. None: standard
      basis.

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
  real, _ = data.dtypes(task)
  refresh_every = train.refresh_every if param.refresh is not None else 0
  # Steps run as blocks with a possible refresh before each: a refresh costs one
  # block boundary, not a branch inside every step.
  block = math.gcd(refresh_every, train.val_every) if refresh_every else train.val_every
  with_spectrum = not param.is_orthogonal and train.approach.startswith("lie_")

  def loss_fn_for(constants):
    to_matrix = _to_matrix_fn(param, constants, change_of_basis)
    return to_matrix, lambda p, x, y: data.squared_error_loss(to_matrix(p), x, y)  # noqa: E731

  def val_pairs(keys, target):
    return data.example_pairs(keys.val, jnp.arange(min(task.val_subsample, task.num_val)), target,
                         task)

  def point(params, constants, val):
    _, loss_fn = loss_fn_for(constants)
    out = {"val_loss": loss_fn(params, *val)}
    if with_spectrum:
      out.update(_spectrum(_after(params, out["val_loss"]), change_of_basis))
    return out

  def refresh(state, constants):
    params, constants = param.refresh(_effective(state.params, change_of_basis), constants)
    if change_of_basis is not None:  # such refreshes return λ = 0 (BASIS_CHANGE_APPROACHES)
      params = {**params, "lam": jnp.zeros_like(state.params["lam"])}
    opt_state = state.opt_state
    if train.refresh_state == "reset":
      opt_state = principal_branch.reset_optimizer_state(optimizer, opt_state, params)
    return training.TrainState(params, opt_state), constants

  def init(key, replicate):
    keys = data.replicate_keys(key, replicate)
    target = data.make_target(keys.target, replicate % len(task.generators), task)
    params, constants = param.init(keys.init, task.n, real)
    params = _after(params, target)  # no LAPACK call overlaps another (`_after`)
    mask = param.gradient_mask(params, constants)
    initial = point(params, constants, val_pairs(keys, target))
    params = _after(params, initial)
    state = training.TrainState(params, optimizer.init(params))
    return ReplicateState(state, target, constants, mask), initial

  def epoch_data(key, replicate, epoch, target):
    keys = data.replicate_keys(key, replicate)
    order = jax.random.permutation(jax.random.fold_in(keys.order, epoch), task.num_train)
    return EpochData(order.astype(jnp.int32), *val_pairs(keys, target))

  def chunk(carry, this_epoch, key, replicate, epoch, first, num):
    keys = data.replicate_keys(key, replicate)
    target, mask = carry.target, carry.mask
    val = (this_epoch.val_x, this_epoch.val_y)

    def step(constants):
      _, loss_fn = loss_fn_for(constants)

      def one(state, idx_B):
        x, y = data.example_pairs(keys.train, idx_B, target, task)
        grads = jax.grad(loss_fn)(state.params, x, y)
        grads = jax.tree.map(jnp.multiply, grads, mask)  # lie_restricted: frozen entries
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        p = param.post_update(optax.apply_updates(state.params, updates), constants)
        return training.TrainState(p, opt_state), None
      return one

    def run_block(sc, xs):
      state, constants = sc
      idx_SxB, first_step = xs
      if refresh_every:
        state, constants = jax.lax.cond(first_step % refresh_every == 0, refresh,
                                        lambda s, c: (s, c), state, constants)
      state, _ = jax.lax.scan(step(constants), state, idx_SxB)
      return (state, constants), None

    def interval(sc, xs):
      idx_SxB, index = xs
      first_step = index * train.val_every + block * jnp.arange(train.val_every // block)
      sc, _ = jax.lax.scan(run_block, sc, (idx_SxB.reshape(-1, block, idx_SxB.shape[-1]),
                                           first_step))
      state, constants = sc
      p = point(state.params, constants, val)
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
    to_matrix, _ = loss_fn_for(carry.constants)
    matrix = to_matrix(carry.train.params)
    target = carry.target
    return dict(test_loss=data.dataset_loss(matrix, keys.test, task.num_test, target, task),
                final_val_loss=data.dataset_loss(matrix, keys.val, task.num_val, target, task))

  return Trainer(init, lambda key, replicate, epoch, state: epoch_data(
      key, replicate, epoch, state.target), chunk, finish, intervals, train.num_epochs)


def make_train(task: TaskSpec, train: TrainSpec,
               change_of_basis=None) -> Callable[[jax.Array, jax.Array], dict]:
  """Builds one replicate's whole training run as one pure function.

  Args:
    task: the `TaskSpec`.
    train: the `TrainSpec`.
    change_of_basis: as in `make_trainer`.

  Returns:
    ``train_fn(key, replicate)``: key is the task's PRNG key (per n), replicate an
    int32 scalar. Returns a dict with ``test_loss`` and ``final_val_loss`` (scalars,
    full sets) and ``val_curve`` (C,) with C = 1 + num_epochs·steps_per_epoch/val_every:
    the subsample validation loss at step 0, val_every, 2·val_every, ...;
    ``params``, the final parameters; and for the λ approaches the spectrum
    diagnostics at the same steps (`SPECTRUM_FIELDS`, each (C,)).

  Raises:
    ValueError: as `make_trainer`.
  """
  trainer = make_trainer(task, train, change_of_basis)

  def train_fn(key, replicate):
    state, initial = trainer.init(key, replicate)
    per_epoch = trainer.intervals_per_epoch
    epoch = lambda s, e: trainer.chunk(  # noqa: E731
        s, trainer.epoch_data(key, replicate, e, s), key, replicate, e, 0, per_epoch)
    state, points = jax.lax.scan(epoch, state, jnp.arange(trainer.num_epochs))
    curves = {k: jnp.concatenate([initial[k][None], v.reshape(-1)]) for k, v in points.items()}
    val_curve = curves.pop("val_loss")
    return dict(trainer.finish(state, key, replicate), params=state.train.params,
                val_curve=val_curve, **curves)

  return train_fn


def validation_steps(train: TrainSpec, task: TaskSpec) -> np.ndarray:
  """Step numbers of the `val_curve` entries: 0, val_every, 2·val_every, ..."""
  total = train.num_epochs * (task.num_train // train.batch_size)
  return np.arange(0, total + 1, train.val_every)
