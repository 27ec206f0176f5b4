"""Learning a unitary operator from noisy pairs y = Ux + ε (paper §3).

Everything here is a pure function of PRNG keys, written for ONE replicate and
batched by the caller with `jax.vmap` (see `lie_unitary.experiments.sweep`):

- Data are never stored. Training pair i of a replicate is regenerated from
  ``fold_in(train_key, i)``: x ∈ Cⁿ with real and imaginary parts ~ N(0, 1) and
  y = Ux + ε with real and imaginary parts of ε ~ N(0, noise_std²) (real x and ε for
  real orthogonal targets). An epoch is a pass over the fixed set of `num_train`
  pairs in a fresh random order (a permutation drawn per epoch), in batches.
- `make_train(task, train)` returns ``train_fn(key, replicate) -> dict`` that draws
  the target (generator ``generators[replicate % len(generators)]``), initialises the
  parametrization, runs ``lax.scan`` over epochs × validation chunks × steps (the
  gradient is multiplied by the parametrization's 0/1 mask BEFORE the optimizer, then
  ``post_update`` runs, e.g. the polar projection), logs the validation loss on a
  fixed subsample every `val_every` steps, and ends with the losses on the full
  validation and test sets.
- `make_baselines(task)` returns ``baselines_fn(key, replicate) -> dict`` with the
  ``true`` (the target), ``rand`` (a fresh matrix from the same generator) and
  ``lstsq`` (closed-form least squares on the training pairs, unconstrained) losses.

The loss is the mean over pairs of the squared l2 norm ‖Ûx − y‖² (complex: the sum
of squared real and imaginary parts). Matrices act on column vectors; a batch of
row vectors x_BxN is mapped to x_BxN @ Uᵀ.

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
from lie_unitary import expm
from lie_unitary import generators
from lie_unitary import parametrizations
from lie_unitary import principal_branch
from lie_unitary.experiments import training
from lie_unitary.sequencing import after as _after

__all__ = [
    "BASELINES", "BASIS_CHANGE_APPROACHES", "COMPLEX_GENERATORS", "LR_SCHEDULES",
    "REAL_GENERATORS", "REFRESH_STATES", "ReplicateState", "SPECTRUM_FIELDS", "TaskSpec",
    "TrainSpec", "Trainer",
    "change_of_basis_matrix", "dataset_loss", "example_pairs", "least_squares_fit",
    "make_baselines", "make_optimizer", "make_target", "make_train", "make_trainer",
    "noise_floor", "squared_error_loss",
    "validation_steps",
]

BASELINES = ("true", "rand", "lstsq")
COMPLEX_GENERATORS = generators.GENERATORS
REAL_GENERATORS = ("haar", "lie")
_EVAL_CHUNK = 10_000  # pairs per chunk when evaluating a whole data set


class TaskSpec(NamedTuple):
  """Static description of the task (hashable; closed over by jitted code).

  Attributes:
    n: matrix size.
    field: "complex" (U(n) targets, complex x) or "real" (SO(n) targets, real x).
    generators: target generators cycled over replicates.
    num_train: training pairs per replicate (10⁶ in the paper).
    num_val: validation pairs (10⁵).
    num_test: test pairs (10⁵).
    val_subsample: the first this many validation pairs are used for the curve.
    noise_std: standard deviation of each real component of ε (0.01).
    lie_target_std: std of the target λ for the "lie" generator (1; 0.01 in app. B).
    real_dtype: "float32" or "float64"; complex data use the matching complex dtype.
  """
  n: int
  field: str = "complex"
  generators: tuple[str, ...] = ("lie", "qr", "composition")
  num_train: int = 1_000_000
  num_val: int = 100_000
  num_test: int = 100_000
  val_subsample: int = 10_000
  noise_std: float = 0.01
  lie_target_std: float = 1.0
  real_dtype: str = "float32"


class TrainSpec(NamedTuple):
  """Static description of one training setting.

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
  optimizer: str = "sgd"
  learning_rate: float = 1e-3
  rmsprop_decay: float = 0.9
  batch_size: int = 20
  num_epochs: int = 1
  val_every: int = 250
  basis_scale: float = 0.0
  lr_schedule: str = "constant"
  refresh_every: int = 0
  refresh_state: str = "keep"


LR_SCHEDULES = ("constant", "cosine")
REFRESH_STATES = ("keep", "reset")
# Approaches that accept appendix B's change of basis λ = λ̃ᵀ M: their refresh (if any)
# returns λ = 0, whose λ̃ is 0 for every M.
BASIS_CHANGE_APPROACHES = ("lie_algebra", "lie_zero_init", "lie_rebased")
SPECTRUM_FIELDS = ("theta_spread", "theta_max_abs", "min_sinc", "wide_share")


class _Keys(NamedTuple):
  target: jax.Array
  train: jax.Array
  val: jax.Array
  test: jax.Array
  rand: jax.Array
  init: jax.Array
  order: jax.Array


def _replicate_keys(key, replicate) -> _Keys:
  """Named keys of one replicate; the same for every approach (paired comparisons)."""
  return _Keys(*jax.random.split(jax.random.fold_in(key, replicate), len(_Keys._fields)))


def _dtypes(task: TaskSpec):
  real = jnp.dtype(task.real_dtype)
  return real, (real if task.field == "real" else algebra.complex_dtype_for(real))


def _real_target(key, n, method, real, lie_std):
  if method == "haar":
    q = jax.random.orthogonal(key, n, dtype=real)
    # Flip the first column where det = -1: exactly Haar on SO(n).
    sign = jnp.sign(jnp.linalg.det(q)).astype(real)
    return q.at[:, 0].multiply(sign)
  if method == "lie":
    return expm.orthogonal_from_lambdas(
        lie_std * jax.random.normal(key, (n * (n - 1) // 2,), real), method="eigh")
  raise ValueError(f"unknown real generator {method!r}; expected one of {REAL_GENERATORS}.")


def make_target(key, generator_index, task: TaskSpec) -> jax.Array:
  """The target matrix from generator ``task.generators[generator_index]``.

  Args:
    key: PRNG key.
    generator_index: int32 scalar (may be traced, e.g. ``replicate % G``): all
      generators are built, one after the other, and this one is selected.
    task: the `TaskSpec`.

  Returns:
    (n, n) unitary (complex) or special orthogonal (real, for ``field="real"``).
  """
  real, cplx = _dtypes(task)

  def branch(method):
    if task.field == "real":
      return lambda k: _real_target(k, task.n, method, real, task.lie_target_std)
    if method == "lie":
      return lambda k: expm.unitary_from_lambdas(
          task.lie_target_std * jax.random.normal(k, (task.n * task.n,), real), method="eigh")
    return lambda k: generators.random_unitary(k, task.n, method, cplx)

  # Every generator is built (under vmap a switch would do so anyway) one after the
  # other (see `_after`), and the replicate's one is selected.
  outs = []
  for method in task.generators:
    outs.append(branch(method)(_after(key, *outs)))
  if len(outs) == 1:
    return outs[0]
  return jnp.stack(outs)[generator_index]


def example_pairs(key, indices, target, task: TaskSpec) -> tuple[jax.Array, jax.Array]:
  """Regenerates pairs (x_i, y_i = U x_i + ε_i) from their indices.

  Args:
    key: the data set's PRNG key (train, validation or test of one replicate).
    indices: int array (P,), pair indices; pair i depends only on fold_in(key, i).
    target: (n, n) matrix U.
    task: the `TaskSpec`.

  Returns:
    x_PxN, y_PxN: complex (real for ``field="real"``) arrays of the data dtype.
  """
  real, cplx = _dtypes(task)
  parts = 4 if task.field == "complex" else 2
  z = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(key, i), (parts, task.n), real))(
      indices)
  if task.field == "complex":
    x_PxN = jax.lax.complex(z[:, 0], z[:, 1])
    eps_PxN = jax.lax.complex(z[:, 2], z[:, 3]) * jnp.asarray(task.noise_std, real)
  else:
    x_PxN, eps_PxN = z[:, 0], z[:, 1] * jnp.asarray(task.noise_std, real)
  return x_PxN, (x_PxN @ target.T.astype(cplx) + eps_PxN).astype(cplx)


def squared_error_loss(matrix, x_PxN, y_PxN) -> jax.Array:
  """Mean over pairs of ‖matrix·x − y‖² (squared complex l2 norm); a real scalar."""
  err = x_PxN @ matrix.T - y_PxN
  return jnp.mean(jnp.sum(jnp.real(err) ** 2 + jnp.imag(err) ** 2, axis=-1))


def _scan_over_pairs(key, num, target, task, fn, init):
  """Folds fn(carry, x, y) over the pairs 0..num-1 in chunks (bounded memory)."""
  size = min(num, _EVAL_CHUNK)
  full = num // size

  def body(carry, c):
    x, y = example_pairs(key, c * size + jnp.arange(size), target, task)
    return fn(carry, x, y), None

  carry, _ = jax.lax.scan(body, init, jnp.arange(full))
  if num % size:
    x, y = example_pairs(key, full * size + jnp.arange(num - full * size), target, task)
    carry = fn(carry, x, y)
  return carry


def dataset_loss(matrix, key, num: int, target, task: TaskSpec) -> jax.Array:
  """`squared_error_loss` of `matrix` over pairs 0..num-1 of a data set (chunked)."""
  real, _ = _dtypes(task)
  total = _scan_over_pairs(
      key, num, target, task,
      lambda s, x, y: s + squared_error_loss(matrix, x, y) * x.shape[0],
      jnp.zeros((), real))
  return total / num


def least_squares_fit(key, target, task: TaskSpec) -> jax.Array:
  """The unconstrained A minimising Σ_i ‖A x_i − y_i‖² over the training pairs.

  Aᵀ = (XᴴX)⁻¹ XᴴY with X, Y the stacked rows, accumulated chunk by chunk.

  Returns:
    (n, n) matrix of the data dtype.
  """
  _, cplx = _dtypes(task)
  zeros = jnp.zeros((task.n, task.n), cplx)

  def acc(carry, x, y):
    xx, xy = carry
    xh = jnp.conj(x).T
    return xx + xh @ x, xy + xh @ y

  xx, xy = _scan_over_pairs(key, task.num_train, target, task, acc, (zeros, zeros))
  return jnp.linalg.solve(xx, xy).T


def make_optimizer(train: TrainSpec, total_steps: int | None = None
                   ) -> optax.GradientTransformation:
  """optax SGD (as the paper ran it) or RMSProp (decay 0.9, no momentum).

  Args:
    train: the `TrainSpec`.
    total_steps: steps of the whole run, for ``lr_schedule="cosine"`` (default: the
      steps of `train.num_epochs` epochs cannot be known here, so it is required).

  Raises:
    ValueError: for an unknown optimizer or schedule, or a cosine schedule without
      `total_steps`.
  """
  if train.lr_schedule not in LR_SCHEDULES:
    raise ValueError(f"unknown lr_schedule {train.lr_schedule!r}; expected one of "
                     f"{LR_SCHEDULES}.")
  rate = train.learning_rate
  if train.lr_schedule == "cosine":
    if not total_steps:
      raise ValueError("lr_schedule 'cosine' needs total_steps.")
    rate = optax.cosine_decay_schedule(train.learning_rate, total_steps)
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
      λ = λ̃ᵀ M; requires an approach in `BASIS_CHANGE_APPROACHES`. None: standard
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
  if change_of_basis is not None and train.approach not in BASIS_CHANGE_APPROACHES:
    raise ValueError(f"a change of basis needs an approach in {BASIS_CHANGE_APPROACHES}; "
                     f"got {train.approach!r}.")
  if train.refresh_state not in REFRESH_STATES:
    raise ValueError(f"unknown refresh_state {train.refresh_state!r}; expected one of "
                     f"{REFRESH_STATES}.")
  if isinstance(train.refresh_every, bool) or not isinstance(train.refresh_every, int) or (
      train.refresh_every < 0):
    raise ValueError(f"refresh_every must be an integer ≥ 0; got {train.refresh_every!r}.")
  steps_per_epoch = task.num_train // train.batch_size
  if steps_per_epoch < 1 or steps_per_epoch % train.val_every:
    raise ValueError(
        f"steps per epoch (num_train // batch_size = {steps_per_epoch}) must be a positive "
        f"multiple of val_every = {train.val_every}.")
  intervals = steps_per_epoch // train.val_every
  optimizer = make_optimizer(train, total_steps=steps_per_epoch * train.num_epochs)
  real, _ = _dtypes(task)
  refresh_every = train.refresh_every if param.refresh is not None else 0
  # Steps run as blocks with a possible refresh before each: a refresh costs one
  # block boundary, not a branch inside every step.
  block = math.gcd(refresh_every, train.val_every) if refresh_every else train.val_every
  with_spectrum = not param.is_orthogonal and train.approach.startswith("lie_")

  def loss_fn_for(constants):
    to_matrix = _to_matrix_fn(param, constants, change_of_basis)
    return to_matrix, lambda p, x, y: squared_error_loss(to_matrix(p), x, y)  # noqa: E731

  def val_pairs(keys, target):
    return example_pairs(keys.val, jnp.arange(min(task.val_subsample, task.num_val)), target,
                         task)

  def point(params, constants, val):
    _, loss_fn = loss_fn_for(constants)
    out = {"val_loss": loss_fn(params, *val)}
    if with_spectrum:
      out.update(_spectrum(_after(params, out["val_loss"]), change_of_basis))
    return out

  def refresh(state, constants):
    params, constants = param.refresh(_effective(state.params, change_of_basis), constants)
    if change_of_basis is not None:  # the refresh returned λ = 0 (BASIS_CHANGE_APPROACHES)
      params = {**params, "lam": jnp.zeros_like(state.params["lam"])}
    opt_state = state.opt_state
    if train.refresh_state == "reset":
      opt_state = principal_branch.reset_optimizer_state(optimizer, opt_state, params)
    return training.TrainState(params, opt_state), constants

  def init(key, replicate):
    keys = _replicate_keys(key, replicate)
    target = make_target(keys.target, replicate % len(task.generators), task)
    params, constants = param.init(keys.init, task.n, real)
    params = _after(params, target)  # no LAPACK call overlaps another (`_after`)
    mask = param.gradient_mask(params, constants)
    initial = point(params, constants, val_pairs(keys, target))
    params = _after(params, initial)
    state = training.TrainState(params, optimizer.init(params))
    return ReplicateState(state, target, constants, mask), initial

  def epoch_data(key, replicate, epoch, target):
    keys = _replicate_keys(key, replicate)
    order = jax.random.permutation(jax.random.fold_in(keys.order, epoch), task.num_train)
    return EpochData(order.astype(jnp.int32), *val_pairs(keys, target))

  def chunk(carry, data, key, replicate, epoch, first, num):
    keys = _replicate_keys(key, replicate)
    target, mask = carry.target, carry.mask
    val = (data.val_x, data.val_y)

    def step(constants):
      _, loss_fn = loss_fn_for(constants)

      def one(state, idx_B):
        x, y = example_pairs(keys.train, idx_B, target, task)
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
    order = jax.lax.dynamic_slice_in_dim(data.order, first * per_interval, num * per_interval)
    indices = epoch * intervals + first + jnp.arange(num)
    (state, constants), points = jax.lax.scan(
        interval, (carry.train, carry.constants),
        (order.reshape(num, train.val_every, -1), indices))
    return carry._replace(train=state, constants=constants), points

  def finish(carry, key, replicate):
    keys = _replicate_keys(key, replicate)
    to_matrix, _ = loss_fn_for(carry.constants)
    matrix = to_matrix(carry.train.params)
    target = carry.target
    return dict(test_loss=dataset_loss(matrix, keys.test, task.num_test, target, task),
                final_val_loss=dataset_loss(matrix, keys.val, task.num_val, target, task))

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


def make_baselines(task: TaskSpec) -> Callable[[jax.Array, jax.Array], dict]:
  """Builds the baselines of one replicate as a pure function.

  Returns:
    ``baselines_fn(key, replicate)`` (same keys and targets as `make_train`) giving
    ``{name: {"test_loss": scalar, "final_val_loss": scalar}}`` for name in
    `BASELINES`: ``true`` (the target), ``rand`` (an independent draw from the same
    generator) and ``lstsq`` (the least-squares fit on the training pairs).
  """

  def baselines_fn(key, replicate):
    keys = _replicate_keys(key, replicate)
    g = replicate % len(task.generators)
    target = make_target(keys.target, g, task)
    rand = make_target(_after(keys.rand, target), g, task)
    lstsq = least_squares_fit(_after(keys.train, rand), target, task)
    matrices = dict(true=target, rand=rand, lstsq=lstsq)
    return {
        name: dict(test_loss=dataset_loss(m, keys.test, task.num_test, target, task),
                   final_val_loss=dataset_loss(m, keys.val, task.num_val, target, task))
        for name, m in matrices.items()
    }

  return baselines_fn


def change_of_basis_matrix(key, n: int, scale: float, dtype=jnp.float32) -> jax.Array:
  """Appendix B's M: identity for scale 0, else entries ~ U(−scale, scale), (n², n²)."""
  if scale == 0:
    return jnp.eye(n * n, dtype=dtype)
  return jax.random.uniform(key, (n * n, n * n), dtype, -scale, scale)


def validation_steps(train: TrainSpec, task: TaskSpec) -> np.ndarray:
  """Step numbers of the `val_curve` entries: 0, val_every, 2·val_every, ..."""
  total = train.num_epochs * (task.num_train // train.batch_size)
  return np.arange(0, total + 1, train.val_every)


def noise_floor(task: TaskSpec) -> float:
  """E‖ε‖² = (2n for complex, n for real) · noise_std²: the loss of the true U."""
  return (2 if task.field == "complex" else 1) * task.n * task.noise_std ** 2

