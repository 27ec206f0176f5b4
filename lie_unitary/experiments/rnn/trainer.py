"""The RNN family's model, optimizer and one unit's jitted, replicate-mapped programs.

Replicate r starts from fold_in(key(seed), r), computed inside the programs, so its
numbers depend neither on the replicates beside it nor on the devices. With
`data_parallel` = d > 1 each replicate's batch is split over d devices (`lax.pmean`).
The guRNN's λ can be refreshed before every `lambda_refresh_every`-th update, U unchanged:
"recentre" (λ ← the principal logarithm's coefficients) or "rebase" (U₀ ← U₀ U(λ), λ ← 0).
"""

from __future__ import annotations

import functools
from typing import Callable
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from lie_unitary import nn as lnn
from lie_unitary import principal_branch
from lie_unitary.experiments import optimizers
from lie_unitary.experiments import replicas
from lie_unitary.experiments import workdir
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn.config import GURNN_MODELS
from lie_unitary.experiments.rnn.config import H0_MODELS
from lie_unitary.experiments.rnn.config import LAMBDA_MODELS
from lie_unitary.experiments.rnn.config import MODELS
from lie_unitary.experiments.rnn.config import ORTHOGONAL_MODELS

__all__ = ["DRIFT_METRIC", "DRIFT_MODELS", "SPECTRUM_METRICS", "Experiment", "make_experiment",
           "make_model", "matrix_drift", "num_params", "optimizer_for", "recurrent_matrix"]

SPECTRUM_METRICS = workdir.SPECTRUM_FIELDS  # λ's spectrum diagnostics in "val" records
DRIFT_METRIC = workdir.DRIFT_FIELD  # the recurrent matrix's distance from its initial value
DRIFT_MODELS = LAMBDA_MODELS + ORTHOGONAL_MODELS  # the models with a recurrent matrix of note


def _refresh(spec) -> tuple[str, int, str]:
  """(lambda_refresh, every, state); ("none", 0, "keep") for models without λ."""
  refresh = spec.lambda_refresh if spec.model in LAMBDA_MODELS else "none"
  if refresh == "none":
    return "none", 0, "keep"
  return refresh, int(spec.lambda_refresh_every), spec.lambda_refresh_state


def make_model(spec) -> lnn.SequenceModel:
  """The `SequenceModel` of `spec.model` for `spec.task`. Raises ValueError: unknown model."""
  task, n = data.get_task(spec.task), spec.hidden_size
  if spec.model in GURNN_MODELS:
    lambda_init = nn.initializers.zeros  # unused by `free`
    if spec.model in LAMBDA_MODELS:
      if spec.lambda_init == "phases":
        r = spec.lambda_phase_range
        lambda_init = lnn.diagonal_phases_init(-r, r)
      elif spec.lambda_init in ("zeros", "haar"):
        lambda_init = principal_branch.lambda_initializer(spec.lambda_init)
      elif spec.lambda_init_std > 0:
        lambda_init = nn.initializers.normal(stddev=spec.lambda_init_std)
    cell = lnn.GURNNCell(n, beta=spec.beta, activation=spec.activation, h0=spec.h0,
                         unconstrained=spec.model == "free", lambda_init=lambda_init,
                         rebased=_refresh(spec)[0] == "rebase")
  elif spec.model == "orthogonal":
    cell = lnn.OrthogonalRNNCell(n, expm_method=spec.orthogonal_expm)
  elif spec.model == "lstm":
    cell = nn.OptimizedLSTMCell(n)
  elif spec.model == "urnn":
    cell = lnn.URNNCell(n, h0=spec.h0)
  elif spec.model == "irnn":
    cell = lnn.SimpleRNNCell.irnn(n)
  elif spec.model == "tanh":
    cell = lnn.SimpleRNNCell.tanh_rnn(n)
  else:
    raise ValueError(f"unknown model {spec.model!r}; choose from {MODELS}.")
  readout = {}
  if spec.readout_init == "torch":  # a complex state: 2n reals
    kernel, bias = lnn.torch_linear_init(2 * n if spec.model in H0_MODELS else n)
    readout = dict(readout_kernel_init=kernel, readout_bias_init=bias)
  return lnn.SequenceModel(cell, task.output_size, task.readout, unroll=spec.unroll, **readout)


_key = lambda path: getattr(path[-1], "key", None)  # a parameter tree leaf's name


def optimizer_for(spec) -> optax.GradientTransformation:
  """RMSProp (no momentum), clipped by global norm and by value where the spec says
  (`clip_norm`, `clip_value`); the guRNN's λ (unclipped) gets
  `lambda_optimizer` at `lambda_learning_rate`, the orthogonal RNN's μ its own RMSProp at
  that rate. Every learning rate follows `lr_drops`."""
  drops = tuple(spec.lr_drops)
  # optax counts the updates made before the current one: a drop at d scales the update
  # with index d and every later one (a drop listed twice, twice). No drops: a constant,
  # and the optimizer state holds no step counter.
  rate = lambda lr: optax.piecewise_constant_schedule(
      lr, {d: spec.lr_drop_factor ** drops.count(d) for d in set(drops)}) if drops else lr
  rmsprop = dict(rmsprop_decay=spec.rmsprop_decay, rmsprop_eps=spec.rmsprop_eps,
                 rmsprop_initial_scale=spec.rmsprop_initial_scale,
                 rmsprop_eps_in_sqrt=spec.rmsprop_eps_in_sqrt)
  rest = optimizers.make_optimizer("rmsprop", rate(spec.learning_rate),
                                 clip_value=spec.clip_value, clip_norm=spec.clip_norm, **rmsprop)
  if spec.model in ORTHOGONAL_MODELS:
    label, leaf, kind = "mu", "mu", "rmsprop"
  elif spec.model not in LAMBDA_MODELS or (spec.lambda_optimizer == "rmsprop" and
                                            spec.lambda_learning_rate == spec.learning_rate):
    return rest
  else:
    label, leaf, kind = "lambda", "lam", spec.lambda_optimizer
  own = optimizers.make_optimizer(kind, rate(spec.lambda_learning_rate), **rmsprop)
  labels = lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: label if _key(path) == leaf else "rest", params)
  return optax.multi_transform({"rest": rest, label: own}, labels)


class Experiment(NamedTuple):
  """One unit's programs over replicates (leading axis R). A TrainState's `params` are the
  flax variables: "params" and, for a rebased guRNN, U₀ in `lnn.BASE_COLLECTION`.

  Attributes:
    init: replicate indices (R,) int32 -> TrainState_R.
    epoch_data: (replicate indices, epoch) -> the epoch's data ((R, N) int32 image
      orders), None without epochs.
    train_chunk: (state, replicate indices, first update u0, number of updates num, epoch
      data, arrays) -> (state, {metric: (R, val_every) float32, update u0 + i's at i < num,
      0 after}); the state donated; num ≤ val_every, within one epoch.
    evaluate: (params_R, a set of the source's) -> {metric: (R,) mean over its batches}.
    source: the unit's `data.Source`.
    spectrum: params_R -> {SPECTRUM_METRICS name: (R,)}; None for models without λ.
    refresh: TrainState_R -> TrainState_R, the λ refresh; None without one.
    drift: (params_R, initial params_R) -> {DRIFT_METRIC: (R,)}, how far the recurrent
      matrix has moved (`recurrent_matrix`); None for models without one.
  """
  init: Callable
  epoch_data: Callable
  train_chunk: Callable
  evaluate: Callable
  source: data.Source
  spectrum: Callable | None = None
  refresh: Callable | None = None
  drift: Callable | None = None


def recurrent_matrix(spec, variables) -> jax.Array:
  """The recurrent matrix of a unit's model from its flax variables.

  Args:
    spec: the unit's spec (its `model` and the model's settings).
    variables: one replicate's flax variables (a TrainState's `params`).

  Returns:
    The guRNN's U(λ) (U₀ U(λ) when rebased), complex (n, n); the orthogonal RNN's
    W = expm(A(μ)), real (n, n) of the parameters' dtype.

  Raises:
    ValueError: a model without such a matrix (`DRIFT_MODELS` lists those with one).
  """
  if spec.model not in DRIFT_MODELS:
    raise ValueError(f"model {spec.model!r} has no recurrent matrix of its own; models "
                     f"with one: {DRIFT_MODELS}.")
  method = (lambda m: m.cell.unitary()) if spec.model in LAMBDA_MODELS else (
      lambda m: m.cell.orthogonal())
  return make_model(spec).apply(variables, method=method)


def matrix_drift(matrix, initial) -> jax.Array:
  """‖M − M₀‖_F / √n of square (..., n, n) matrices: for unitary or orthogonal M and M₀,
  the root mean square of how far each column moved (0 at M₀, at most 2). Real."""
  return jnp.sqrt(jnp.sum(jnp.abs(matrix - initial) ** 2, axis=(-2, -1)) / matrix.shape[-1])


@functools.lru_cache(maxsize=16)
def make_experiment(spec, sharding: jax.sharding.Sharding | None = None,
                    source: data.Source | None = None) -> Experiment:
  """A unit's jitted, replicate-mapped `Experiment` (cached per spec, sharding, source).

  Batches are made inside the programs from the replicate's key and the update index, so
  a resumed run makes the uninterrupted run's steps. A data axis of d > 1 devices gives
  each its d-th of a batch's rows (evaluation too with `source.split_eval`) and its own
  initial-state key, fold_in(key, shard).

  Args:
    spec: the unit's frozen spec.
    sharding: the replicates' sharding; None: `replicas.replicate_sharding()`.
    source: the task's `data.Source`; None: `data.synthetic_source(spec)`.

  Raises:
    ValueError: data_parallel not the sharding's data axis, a batch size the data axis
      does not divide, or from `data.synthetic_source`.
  """
  source = data.synthetic_source(spec) if source is None else source
  sharding = replicas.replicate_sharding() if sharding is None else sharding
  program = functools.partial(replicas.map_replicates, sharding=sharding)
  task, model, optimizer = data.get_task(spec.task), make_model(spec), optimizer_for(spec)
  split = sharding.mesh.shape.get(replicas.DATA_AXIS, 1)
  if spec.data_parallel not in (1, split):
    raise ValueError(f"data_parallel = {spec.data_parallel} needs a sharding whose mesh has "
                     f"a {replicas.DATA_AXIS!r} axis of that size (replicas.replicate_sharding).")
  if spec.batch_size % split or (source.split_eval and spec.eval_batch_size % split):
    raise ValueError(f"a data axis of {split} devices must divide batch_size = "
                     f"{spec.batch_size}" + (f" and eval_batch_size = {spec.eval_batch_size}"
                                             if source.split_eval else "") + ".")
  refresh, refresh_every, refresh_rule = _refresh(spec)
  zeros = lambda: {k: jnp.float32(0) for k in source.names}
  # The optimizer sees the collection "params" only (not a rebased guRNN's base).
  trainable = lambda variables: {"params": variables["params"]}

  def keys(replicate):  # parameters, initial state at init, data, training initial states
    root = jax.random.fold_in(jax.random.key(spec.seed), replicate)
    return [jax.random.fold_in(root, i) for i in range(4)]

  def metrics(params, rows, carry_key):
    inputs, targets = rows
    return source.metrics(model.apply(params, inputs, carry_key), targets)

  def shard(rows, key, parts):  # this device's share of the batch rows, its own key
    i = jax.lax.axis_index(replicas.DATA_AXIS)
    share = lambda a: jax.lax.dynamic_slice_in_dim(a, i * (a.shape[0] // parts),
                                                   a.shape[0] // parts)
    return jax.tree.map(share, rows), jax.random.fold_in(key, i)

  def init(replicate):
    params_key, carry_key, _, _ = keys(replicate)
    x = jnp.zeros((1, task.length(spec.T), task.input_size), jnp.float32)
    variables = model.init(params_key, x, carry_key)
    if spec.model == "lstm" and spec.lstm_forget_bias:  # flax's zeros otherwise
      cell = variables["params"]["cell"]
      forget = {**cell["hf"], "bias": jnp.full_like(cell["hf"]["bias"], spec.lstm_forget_bias)}
      variables = {**variables, "params": {**variables["params"], "cell": {**cell, "hf": forget}}}
    return optimizers.TrainState(variables, optimizer.init(trainable(variables)))

  def refresh_state(state):  # λ re-centred or re-based, the same U
    variables, cell = dict(state.params), state.params["params"]["cell"]
    lam = cell["lam"]
    if refresh == "recentre":
      lam = principal_branch.principal_lambdas(lam)
    else:
      col = variables[lnn.BASE_COLLECTION]
      base, lam = principal_branch.rebase(col["cell"]["base"], lam)
      variables[lnn.BASE_COLLECTION] = {**col, "cell": {**col["cell"], "base": base}}
    variables["params"] = {**variables["params"], "cell": {**cell, "lam": lam}}
    opt_state = state.opt_state
    if refresh_rule == "reset":
      params = trainable(variables)
      is_lam = jax.tree_util.tree_map_with_path(lambda path, _: _key(path) == "lam", params)
      opt_state = principal_branch.reset_optimizer_state(optimizer, opt_state, params, is_lam)
    return optimizers.TrainState(variables, opt_state)

  def train_chunk(state, replicate, start, num, this_epoch, arrays):
    _, _, data_key, carry_key = keys(replicate)

    def step(u, carry):
      state, per_update = carry
      if refresh != "none":
        # u is the same for every replicate (not vmapped): a real branch, not a select.
        state = jax.lax.cond(u % refresh_every == 0, refresh_state, lambda s: s, state)
      rows = source.train_batch(data_key, u, this_epoch, arrays)
      step_key = jax.random.fold_in(carry_key, u)
      if split > 1:  # the mean of the shards' means is the whole batch's
        rows, step_key = shard(rows, step_key, split)
      params = trainable(state.params)

      def loss(p):  # other collections (a rebased guRNN's base) are constants of it
        out = metrics({**state.params, **p}, rows, step_key)
        return out["loss"], out

      (_, out), grads = jax.value_and_grad(loss, has_aux=True)(params)
      if split > 1:
        out, grads = jax.lax.pmean((out, grads), replicas.DATA_AXIS)
      updates, opt_state = optimizer.update(grads, state.opt_state, params)
      variables = {**state.params, **optax.apply_updates(params, updates)}
      per_update = {k: v.at[u - start].set(out[k]) for k, v in per_update.items()}
      return optimizers.TrainState(variables, opt_state), per_update

    # Each update's metrics, summed on the host: the same sums however calls are split.
    blank = {k: jnp.zeros((spec.val_every,), jnp.float32) for k in source.names}
    return jax.lax.fori_loop(start, start + num, step, (state, blank))

  def evaluate(params, eval_set):
    count, carry_key, batch = source.eval_batches(eval_set)
    parts = split if source.split_eval else 1

    def one_batch(j, sums):
      rows, key = batch(j), carry_key
      if parts > 1:
        rows, key = shard(rows, key, parts)
      return jax.tree.map(jnp.add, sums, metrics(params, rows, key))

    sums = jax.lax.fori_loop(0, count, one_batch, zeros())
    if parts > 1:
      sums = jax.lax.pmean(sums, replicas.DATA_AXIS)
    return {k: v / count for k, v in sums.items()}

  # The state, epoch data and arrays are replicated along a data row.
  v_epoch = (program(lambda r, epoch: source.epoch_data(keys(r)[2], epoch), (0, None))
             if source.epoch_data else lambda replicate, epoch: None)
  v_train = program(train_chunk, (0, 0, None, None, 0 if source.epoch_data else None, None),
                    donate_argnums=(0,))
  v_spectrum = None
  if spec.model in LAMBDA_MODELS:
    v_stats = program(lambda params: principal_branch.spectrum_stats(
        params["params"]["cell"]["lam"]), (0,))
    v_spectrum = lambda params: dict(zip(SPECTRUM_METRICS, v_stats(params)))
  v_refresh = None if refresh == "none" else program(refresh_state, (0,))
  v_drift = None
  if spec.model in DRIFT_MODELS:
    v_drift = program(lambda params, initial: {DRIFT_METRIC: matrix_drift(
        recurrent_matrix(spec, params), recurrent_matrix(spec, initial))}, (0, 0))
  return Experiment(program(init, (0,)), v_epoch, v_train, program(evaluate, (0, None)),
                    source, v_spectrum, v_refresh, v_drift)


def num_params(model: str, hidden_size: int, input_size: int, output_size: int,
               activation: str = "relu") -> int:
  """Trainable reals of a 'gurnn', 'gurnn_beta', 'orthogonal' or 'lstm' `SequenceModel`
  with a last-state readout (a constrained matrix counts its manifold's dimension).

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
