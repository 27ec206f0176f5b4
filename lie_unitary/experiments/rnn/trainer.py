"""The RNN family's pure pieces: model, optimizer, and one unit's jitted programs (paper §4).

A unit's *spec* (`lie_unitary.experiments.rnn.experiment.unit_spec`) is a frozen,
hashable ConfigDict of every setting of one (task, model, T); from it this module
builds the model, the optimizer and the replicate-vmapped init / train / evaluate
functions (`make_experiment`, cached on the spec, so a resumed or extended unit in
the same process reuses the compiled programs).

Replicates: replicate r of a unit starts from the key fold_in(key(seed), r), computed
inside the programs from the replicate index, so its numbers depend on neither the
number of replicates run beside it nor the devices they are sharded over. Training
batch u of replicate r is drawn from fold_in(data_key_r, u mod (num_train /
batch_size)), i.e. a fixed training set of `num_train` sequences per replicate
visited in the same order every epoch (`num_train = 0`: fresh data every update).
Validation and test sets are fixed (`eval_seed`), the same for every replicate and
model, generated batch by batch inside jit and never stored.

With `data_parallel` = d > 1 each replicate's batch is split over d devices (a mesh
axis of `replicas.replicate_sharding`): each draws the whole batch, keeps its share,
computes its gradient, and the devices average them (`lax.pmean`) before the same
update; its initial states come from its own key, fold_in(step key, shard).

The guRNN's λ can be refreshed every `lambda_refresh_every` updates, before the
update whose index u is a multiple of it (u = 0 included), inside the compiled loop
(`lie_unitary.principal_branch`): "recentre" replaces λ by the coefficients of the
principal logarithm of U(λ), "rebase" moves U(λ) into the cell's base U₀ and sets
λ = 0 (U = U₀ · U(λ), the dynamic trivialization). Neither changes U; with
`lambda_refresh_state = "reset"` the optimizer's moments of λ restart.
"""

from __future__ import annotations

import functools
import math
from typing import Callable
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from lie_unitary import nn as lnn
from lie_unitary import principal_branch
from lie_unitary.experiments import replicas
from lie_unitary.experiments import training
from lie_unitary.experiments import workdir
from lie_unitary.experiments.rnn import data

__all__ = ["GURNN_MODELS", "H0_MODELS", "LAMBDA_INITS", "LAMBDA_MODELS",
           "LAMBDA_REFRESHES", "MODELS", "ORTHOGONAL_MODELS", "SPECTRUM_METRICS", "Experiment",
           "ImageExperiment", "ReplicateKeys", "lambda_refresh", "make_experiment",
           "make_image_experiment", "make_model", "num_params", "optimizer_for"]

MODELS = ("gurnn", "gurnn_beta", "urnn", "lstm", "irnn", "tanh", "free", "orthogonal")
# Models built on GURNNCell (β, activation); `free` is its recurrence without the
# constraint: an unconstrained 2n×2n matrix instead of U(λ), so it has no λ.
GURNN_MODELS = ("gurnn", "gurnn_beta", "free")
LAMBDA_MODELS = ("gurnn", "gurnn_beta")
# expRNN's orthogonal RNN (`lie_unitary.nn.OrthogonalRNNCell`): real state, W ∈ SO(n)
# from so(n) coefficients μ, trained at its own learning rate (expRNN: a tenth).
ORTHOGONAL_MODELS = ("orthogonal",)
# Models with a complex state whose initial value `h0` sets.
H0_MODELS = ("gurnn", "gurnn_beta", "free", "urnn")
# λ inits: N(0, std²) (the paper), Henaff's diagonal phases, U = I, principal log of Haar.
LAMBDA_INITS = ("normal", "phases", "zeros", "haar")
LAMBDA_REFRESHES = ("none", "recentre", "rebase")
# Val-record names of the spectrum diagnostics of λ's chart.
SPECTRUM_METRICS = workdir.SPECTRUM_FIELDS


def lambda_refresh(spec) -> tuple[str, int, str]:
  """(lambda_refresh, lambda_refresh_every, lambda_refresh_state) of a unit's spec:
  ("none", 0, "keep") for models without λ and for specs without the fields (a unit
  without refresh does not carry them, so its identity is that of older runs)."""
  refresh = spec.get("lambda_refresh", "none") if spec.model in LAMBDA_MODELS else "none"
  if refresh == "none":
    return "none", 0, "keep"
  return refresh, int(spec.lambda_refresh_every), spec.lambda_refresh_state


def make_model(spec) -> lnn.SequenceModel:
  """The `SequenceModel` (cell + scan + readout) of `spec.model` for `spec.task`."""
  task = data.get_task(spec.task)
  n = spec.hidden_size
  if spec.model in GURNN_MODELS:
    lambda_init = nn.initializers.zeros  # unused by `free`
    if spec.model in LAMBDA_MODELS:
      if spec.lambda_init == "phases":
        r = spec.get("lambda_phase_range", math.pi)
        lambda_init = lnn.diagonal_phases_init(-r, r)
      elif spec.lambda_init in ("zeros", "haar"):
        lambda_init = principal_branch.lambda_initializer(spec.lambda_init)
      elif spec.lambda_init_std > 0:
        lambda_init = nn.initializers.normal(stddev=spec.lambda_init_std)
    cell = lnn.GURNNCell(n, beta=spec.beta, activation=spec.activation, h0=spec.h0,
                         unconstrained=spec.model == "free", lambda_init=lambda_init,
                         rebased=lambda_refresh(spec)[0] == "rebase")
  elif spec.model == "urnn":
    cell = lnn.URNNCell(n, h0=spec.h0)
  elif spec.model == "lstm":
    cell = nn.OptimizedLSTMCell(n)
  elif spec.model == "irnn":
    cell = lnn.SimpleRNNCell.irnn(n)
  elif spec.model == "tanh":
    cell = lnn.SimpleRNNCell.tanh_rnn(n)
  elif spec.model == "orthogonal":
    # Real W ∈ SO(n) vmapped over replicates: eigh beats Padé on batches.
    cell = lnn.OrthogonalRNNCell(n, expm_method="eigh")
  else:
    raise ValueError(f"unknown model {spec.model!r}; choose from {MODELS}.")
  return lnn.SequenceModel(cell, task.output_size, task.readout, unroll=spec.unroll)


def _is_lambda(path) -> bool:
  return getattr(path[-1], "key", None) == "lam"


def _is_mu(path) -> bool:
  return getattr(path[-1], "key", None) == "mu"


def optimizer_for(spec) -> optax.GradientTransformation:
  """RMSProp (no momentum) on everything, optionally clipped by value first; the
  guRNN's λ, unclipped, gets `lambda_optimizer` at `lambda_learning_rate`: plain SGD
  (as the original code) or its own RMSProp (with RMSProp at the shared learning rate
  it is simply part of the rest); the orthogonal RNN's μ, unclipped, its own RMSProp
  at `lambda_learning_rate`. Every learning rate follows `lr_drops`."""
  rate = lambda lr: training.step_schedule(lr, spec.lr_drops, spec.lr_drop_factor)
  rmsprop = dict(rmsprop_decay=spec.rmsprop_decay, rmsprop_eps=spec.rmsprop_eps,
                 rmsprop_initial_scale=spec.rmsprop_initial_scale,
                 rmsprop_eps_in_sqrt=spec.get("rmsprop_eps_in_sqrt", True))
  rest = training.make_optimizer("rmsprop", rate(spec.learning_rate),
                                 clip_value=spec.clip_value, **rmsprop)
  if spec.model in ORTHOGONAL_MODELS:  # μ: RMSProp at its own rate, unclipped (expRNN)
    mu = training.make_optimizer("rmsprop", rate(spec.lambda_learning_rate), **rmsprop)
    labels = lambda params: jax.tree_util.tree_map_with_path(
        lambda path, _: "mu" if _is_mu(path) else "rest", params)
    return optax.multi_transform({"rest": rest, "mu": mu}, labels)
  if spec.model not in LAMBDA_MODELS or (spec.lambda_optimizer == "rmsprop" and
                                          spec.lambda_learning_rate == spec.learning_rate):
    return rest
  lam = training.make_optimizer(spec.lambda_optimizer, rate(spec.lambda_learning_rate),
                                **rmsprop)
  labels = lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: "lambda" if _is_lambda(path) else "rest", params)
  return optax.multi_transform({"rest": rest, "lambda": lam}, labels)


class ReplicateKeys(NamedTuple):
  """A replicate's keys, each for one purpose (fold_in(fold_in(key(seed), r), i), i in order).

  Attributes:
    params: initial parameters.
    init_carry: the initial state drawn while initialising.
    data: training batches (batch b from fold_in(data, b)).
    carry: random initial states during training (update u from fold_in(carry, u)).
  """
  params: jax.Array
  init_carry: jax.Array
  data: jax.Array
  carry: jax.Array


class Experiment(NamedTuple):
  """Pure functions of one unit, batched over replicates (leading axis R).

  A TrainState's `params` are the model's flax variables: the collection "params"
  (trained; the optimizer state is of ``{"params": ...}``) and, for a rebased guRNN,
  the base U₀ in `lnn.BASE_COLLECTION` (moved only by a refresh).

  Attributes:
    init: replicate indices (R,) int32 -> TrainState_R.
    train_chunk: (TrainState_R, replicate indices (R,), first update, number of
      updates) -> (TrainState_R, mean training loss per replicate (R,)); jitted, the
      state donated.
    evaluate: (params_R, which ('val' or 'test'), number of sequences) -> (R,) mean loss.
    loss_fn: (params, x, targets, carry_key) -> scalar, for one replicate.
    spectrum: params_R -> {name in SPECTRUM_METRICS: (R,)}, the
      `principal_branch.spectrum_stats` of λ; None for models without λ.
    refresh: TrainState_R -> TrainState_R, the unit's λ refresh (what `train_chunk`
      does before every `lambda_refresh_every`-th update); None without a refresh.
  """
  init: Callable
  train_chunk: Callable
  evaluate: Callable
  loss_fn: Callable
  spectrum: Callable | None = None
  refresh: Callable | None = None


def _trainable(variables):
  """The collection the optimizer sees: {"params": ...} without any other collection."""
  return {"params": variables["params"]}


def _lambda(variables):
  return variables["params"]["cell"]["lam"]


def _with_cell_entry(variables, collection, name, value):
  """`variables` with variables[collection]["cell"][name] replaced (a new dict)."""
  col = dict(variables[collection])
  col["cell"] = {**col["cell"], name: value}
  return {**variables, collection: col}


def _refresh_fn(spec, optimizer) -> Callable:
  """TrainState -> TrainState with λ re-centred or re-based (the same U)."""
  refresh, _, state_rule = lambda_refresh(spec)

  def apply(state):
    variables, lam = state.params, _lambda(state.params)
    if refresh == "recentre":
      variables = _with_cell_entry(variables, "params", "lam",
                                   principal_branch.principal_lambdas(lam))
    else:
      base = variables[lnn.BASE_COLLECTION]["cell"]["base"]
      base, lam = principal_branch.rebase(base, lam)
      variables = _with_cell_entry(variables, lnn.BASE_COLLECTION, "base", base)
      variables = _with_cell_entry(variables, "params", "lam", lam)
    opt_state = state.opt_state
    if state_rule == "reset":
      trainable = _trainable(variables)
      opt_state = principal_branch.reset_optimizer_state(
          optimizer, opt_state, trainable,
          jax.tree_util.tree_map_with_path(lambda path, _: _is_lambda(path), trainable))
    return training.TrainState(variables, opt_state)

  return apply


def _check_data_axis(data_parallel: int, sharding) -> None:
  """Raises ValueError unless data_parallel is 1 or the size of the sharding's data axis."""
  if data_parallel > 1 and (sharding is None or sharding.mesh.shape.get(replicas.DATA_AXIS)
                            != data_parallel):
    raise ValueError(f"data_parallel = {data_parallel} needs a sharding whose mesh has a "
                     f"{replicas.DATA_AXIS!r} axis of that size (replicas.replicate_sharding).")


def _program(fn: Callable, in_axes: tuple, sharding, donate: bool = False) -> Callable:
  """`replicas.map_replicates` of fn, or ``jit(vmap(fn))`` without a sharding."""
  donate_argnums = (0,) if donate else ()
  if sharding is None:
    return jax.jit(jax.vmap(fn, in_axes=in_axes), donate_argnums=donate_argnums)
  return replicas.map_replicates(fn, in_axes, sharding, donate_argnums=donate_argnums)


def _data_shard(rows, key, data_parallel: int):
  """This device's equal share of `rows` (a pytree of arrays with a leading batch axis)
  and its own key, fold_in(key, shard); inside `shard_map` over `replicas.DATA_AXIS`."""
  shard = jax.lax.axis_index(replicas.DATA_AXIS)

  def share(a):
    size = a.shape[0] // data_parallel
    return jax.lax.dynamic_slice_in_dim(a, shard * size, size)

  return jax.tree.map(share, rows), jax.random.fold_in(key, shard)


@functools.lru_cache(maxsize=16)
def make_experiment(spec, sharding: jax.sharding.Sharding | None = None) -> Experiment:
  """Builds the jitted, replicate-vmapped init / train / evaluate functions of a unit.

  Args:
    spec: the unit's frozen spec (hashable: the cache key).
    sharding: where the replicate axis of every output lives (the runner's replicate
      sharding over all devices); None: wherever jit puts it. A spec with
      data_parallel = d > 1 needs the sharding of `replicas.replicate_sharding(
      data_parallel=d)`: training then splits each replicate's batch over the mesh's
      data axis (`jax.shard_map`, gradients averaged with `pmean`). On several CPU
      devices of one process every program maps each device's replicates one at a
      time instead of vmapping them (batched eighs on two such devices at once
      deadlock their shared thread pool).

  Raises:
    ValueError: data_parallel > 1 without a matching sharding.
  """
  task = data.get_task(spec.task)
  model = make_model(spec)
  optimizer = optimizer_for(spec)
  L = task.length(spec.T)
  data_parallel = spec.get("data_parallel", 1)
  _check_data_axis(data_parallel, sharding)
  num_batches = spec.num_train // spec.batch_size if spec.num_train > 0 else 0

  def replicate_keys(replicate) -> ReplicateKeys:
    root = jax.random.fold_in(jax.random.key(spec.seed), replicate)
    return ReplicateKeys(*(jax.random.fold_in(root, i) for i in range(len(ReplicateKeys._fields))))

  def loss_fn(params, x, targets, carry_key):
    return task.loss(model.apply(params, x, carry_key), targets)

  refresh, refresh_every, _ = lambda_refresh(spec)
  refresh_state = _refresh_fn(spec, optimizer) if refresh != "none" else None

  def init(replicate):
    keys = replicate_keys(replicate)
    x = jnp.zeros((1, L, task.input_size), jnp.float32)
    variables = model.init(keys.params, x, keys.init_carry)
    return training.TrainState(variables, optimizer.init(_trainable(variables)))

  def train_chunk(state, replicate, start, num):
    keys = replicate_keys(replicate)
    data_key, carry_key = keys.data, keys.carry

    def step(u, carry):
      state, loss_sum = carry
      if refresh_state is not None:
        # u is the same for every replicate (not vmapped): a real branch, not a select.
        state = jax.lax.cond(u % refresh_every == 0, refresh_state, lambda s: s, state)
      batch_index = u % num_batches if num_batches else u
      x, targets = task.sample(jax.random.fold_in(data_key, batch_index), spec.batch_size,
                               spec.T)
      trainable = _trainable(state.params)
      step_key = jax.random.fold_in(carry_key, u)
      if data_parallel > 1:
        # This device's share of the batch (and its own initial states); the mean of
        # the shards' mean losses and gradients is the whole batch's.
        (x, targets), step_key = _data_shard((x, targets), step_key, data_parallel)
      # Other collections (a rebased guRNN's base) are constants of the gradient.
      loss, grads = jax.value_and_grad(
          lambda p: loss_fn({**state.params, **p}, x, targets, step_key))(trainable)
      if data_parallel > 1:
        loss, grads = jax.lax.pmean((loss, grads), replicas.DATA_AXIS)
      updates, opt_state = optimizer.update(grads, state.opt_state, trainable)
      variables = {**state.params, **optax.apply_updates(trainable, updates)}
      return training.TrainState(variables, opt_state), loss_sum + loss

    state, loss_sum = jax.lax.fori_loop(start, start + num, step, (state, jnp.float32(0)))
    return state, loss_sum / num

  def evaluate(params, salt, num_batches):
    key = jax.random.fold_in(jax.random.key(spec.eval_seed), salt)
    carry_key = jax.random.fold_in(key, 2**30)

    def one_batch(j, total):
      x, targets = task.sample(jax.random.fold_in(key, j), spec.eval_batch_size, spec.T)
      return total + loss_fn(params, x, targets, carry_key)

    return jax.lax.fori_loop(0, num_batches, one_batch, jnp.float32(0)) / num_batches

  # Each device runs its replicates' steps on its share of their batches (with
  # data_parallel > 1); every array but the gradient's inputs is replicated over the
  # data axis.
  v_init = _program(init, (0,), sharding)
  v_train = _program(train_chunk, (0, 0, None, None), sharding, donate=True)
  v_eval = _program(evaluate, (0, None, None), sharding)

  def evaluate_sets(params, which, num_sequences):
    if num_sequences % spec.eval_batch_size:
      raise ValueError(f"{num_sequences=} must be a multiple of {spec.eval_batch_size=}.")
    return v_eval(params, {"val": 1, "test": 2}[which], num_sequences // spec.eval_batch_size)

  v_spectrum = None
  if spec.model in LAMBDA_MODELS:
    v_spectrum_stats = _program(
        lambda params: principal_branch.spectrum_stats(_lambda(params)), (0,), sharding)

    def v_spectrum(params):
      return dict(zip(SPECTRUM_METRICS, v_spectrum_stats(params)))

  v_refresh = None if refresh_state is None else _program(refresh_state, (0,), sharding)
  return Experiment(v_init, v_train, evaluate_sets, loss_fn, v_spectrum, v_refresh)


def num_params(model: str, hidden_size: int, input_size: int, output_size: int,
               activation: str = "relu") -> int:
  """Trainable reals of `model`'s `SequenceModel` with a last-state readout: the
  manifold's dimension for a constrained matrix (n² for U(n), n(n-1)/2 for SO(n)).

  Args:
    model: 'gurnn', 'gurnn_beta', 'orthogonal' or 'lstm'.
    hidden_size: the cell's size (complex units for the guRNN).
    input_size: D; output_size: K.
    activation: the guRNN's activation (its modReLU has a bias per unit).

  Raises:
    ValueError: another model, or a size that is not an integer ≥ 1.
  """
  if model in LAMBDA_MODELS:
    return lnn.gurnn_num_params(hidden_size, input_size, output_size, activation)
  if model in ORTHOGONAL_MODELS:
    return lnn.orthogonal_rnn_num_params(hidden_size, input_size, output_size)
  if model == "lstm":  # flax's OptimizedLSTMCell: 4 gates of D·h + h·h + h, then the readout
    h = hidden_size
    return 4 * h * (input_size + h + 1) + (h + 1) * output_size
  raise ValueError(f"num_params counts {LAMBDA_MODELS + ORTHOGONAL_MODELS + ('lstm',)}; "
                   f"got {model!r}.")


class ImageExperiment(NamedTuple):
  """Pure functions of one sequential-image unit, batched over replicates (axis R).

  Attributes:
    init: replicate indices (R,) int32 -> TrainState_R.
    epoch_order: (replicate indices (R,), epoch) -> (R, N) int32: each replicate's
      order of the N training images in that epoch (a permutation drawn from its key).
    train_chunk: (TrainState_R, replicate indices, first update, number of updates,
      epoch order (R, N), ImageSets) -> (TrainState_R, {"loss", "accuracy"}: (R,) means
      over the updates); update u reads the images order[(u mod S)·B : ...] of its
      epoch, S = N // B updates per epoch (the last N mod B images of an order are
      left out). Jitted, the state donated; the updates must stay within one epoch.
    evaluate: (params_R, images (M, P) uint8, labels (M,)) -> {"loss", "accuracy"}:
      (R,), over the whole set in batches of `eval_batch_size` (which divides M).
    updates_per_epoch: S.
  """
  init: Callable
  epoch_order: Callable
  train_chunk: Callable
  evaluate: Callable
  updates_per_epoch: int


def make_image_experiment(spec, sharding: jax.sharding.Sharding | None,
                          num_train: int) -> ImageExperiment:
  """The jitted, replicate-vmapped programs of a sequential-image unit (`ImageExperiment`).

  The images stay on the device (uint8) and every batch is gathered inside the jitted
  chunk from the epoch's order, so a replicate's batches are a pure function of its key
  and the update index, and a run resumed mid-epoch makes the uninterrupted run's steps.

  With a sharding whose mesh has a data axis of size d > 1 (`replicas.replicate_sharding(
  data_parallel=d)`), every training batch and every evaluation batch is split over it:
  each device takes its d-th of the batch's images (the same images as on one device)
  and its own initial-state key, fold_in(key, shard), and the devices average losses,
  accuracies and gradients (`lax.pmean`) before the same update. With zero initial
  states the numbers are one device's up to the order of float sums.

  Args:
    spec: the unit's spec (task 'pixel' or 'permuted').
    sharding: the replicate axis' sharding (`replicas.replicate_sharding()`), or None.
    num_train: N, the training images.

  Raises:
    ValueError: a task that is not an image task, fewer training images than a batch,
      a batch (or spec.eval_batch_size) that the data axis does not divide, or a spec
      whose data_parallel is not the data axis' size.
  """
  if spec.task not in data.IMAGE_TASKS:
    raise ValueError(f"task {spec.task!r} is not an image task {data.IMAGE_TASKS}.")
  if num_train < spec.batch_size:
    raise ValueError(f"{num_train} training images cannot fill a batch of {spec.batch_size}.")
  split = 1 if sharding is None else sharding.mesh.shape.get(replicas.DATA_AXIS, 1)
  _check_data_axis(spec.get("data_parallel", split), sharding)
  if spec.batch_size % split or spec.eval_batch_size % split:
    raise ValueError(f"a data axis of {split} devices must divide batch_size = "
                     f"{spec.batch_size} and eval_batch_size = {spec.eval_batch_size}.")
  model = make_model(spec)
  optimizer = optimizer_for(spec)
  per_epoch = num_train // spec.batch_size

  def replicate_keys(replicate) -> ReplicateKeys:
    root = jax.random.fold_in(jax.random.key(spec.seed), replicate)
    return ReplicateKeys(*(jax.random.fold_in(root, i) for i in range(len(ReplicateKeys._fields))))

  def metrics(params, pixels, labels, carry_key):
    logits = model.apply(params, data.image_inputs(pixels), carry_key)
    return data.classification_loss(logits, labels), data.accuracy(logits, labels)

  def init(replicate):
    keys = replicate_keys(replicate)
    x = jnp.zeros((1, spec.T, 1), jnp.float32)
    variables = model.init(keys.params, x, keys.init_carry)
    return training.TrainState(variables, optimizer.init(_trainable(variables)))

  def epoch_order(replicate, epoch):
    key = jax.random.fold_in(replicate_keys(replicate).data, epoch)
    return jax.random.permutation(key, num_train).astype(jnp.int32)

  def train_chunk(state, replicate, start, num, order, sets):
    carry_key = replicate_keys(replicate).carry

    def step(u, carry):
      state, loss_sum, acc_sum = carry
      batch = jax.lax.dynamic_slice_in_dim(order, (u % per_epoch) * spec.batch_size,
                                           spec.batch_size)
      step_key = jax.random.fold_in(carry_key, u)
      if split > 1:
        batch, step_key = _data_shard(batch, step_key, split)
      trainable = _trainable(state.params)
      (loss, acc), grads = jax.value_and_grad(
          lambda p: metrics({**state.params, **p}, sets.train_x[batch], sets.train_y[batch],
                            step_key), has_aux=True)(trainable)
      if split > 1:
        loss, acc, grads = jax.lax.pmean((loss, acc, grads), replicas.DATA_AXIS)
      updates, opt_state = optimizer.update(grads, state.opt_state, trainable)
      variables = {**state.params, **optax.apply_updates(trainable, updates)}
      return training.TrainState(variables, opt_state), loss_sum + loss, acc_sum + acc

    state, loss_sum, acc_sum = jax.lax.fori_loop(
        start, start + num, step, (state, jnp.float32(0), jnp.float32(0)))
    return state, {"loss": loss_sum / num, "accuracy": acc_sum / num}

  def evaluate(params, pixels, labels):
    size = spec.eval_batch_size
    carry_key = jax.random.key(spec.eval_seed)

    def one_batch(j, totals):
      x = jax.lax.dynamic_slice_in_dim(pixels, j * size, size)
      y = jax.lax.dynamic_slice_in_dim(labels, j * size, size)
      key = carry_key
      if split > 1:
        (x, y), key = _data_shard((x, y), key, split)
      loss, acc = metrics(params, x, y, key)
      return totals[0] + loss, totals[1] + acc

    count = labels.shape[0] // size
    loss, acc = jax.lax.fori_loop(0, count, one_batch, (jnp.float32(0), jnp.float32(0)))
    if split > 1:
      loss, acc = jax.lax.pmean((loss, acc), replicas.DATA_AXIS)
    return {"loss": loss / count, "accuracy": acc / count}

  v_init = _program(init, (0,), sharding)
  v_order = _program(epoch_order, (0, None), sharding)
  # Replicates over the mesh's first axis; each device of a data row runs its share of
  # every batch (the images, the state and the orders are replicated along it).
  v_train = _program(train_chunk, (0, 0, None, None, 0, None), sharding, donate=True)
  v_eval = _program(evaluate, (0, None, None), sharding)

  def evaluate_set(params, pixels, labels):
    if labels.shape[0] % spec.eval_batch_size:
      raise ValueError(f"{labels.shape[0]} images are not a multiple of "
                       f"eval_batch_size = {spec.eval_batch_size}.")
    return v_eval(params, pixels, labels)

  return ImageExperiment(v_init, v_order, v_train, evaluate_set, per_epoch)
