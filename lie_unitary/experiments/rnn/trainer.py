"""The RNN family's model and optimizer, one replicate's training as plain functions of
the unit's spec, and `make_experiment`, those functions mapped over the replicates.

Replicate r starts from fold_in(key(seed), r), computed inside the programs, so its
numbers depend neither on the replicates beside it nor on the devices. With
`data_parallel` = d > 1 each replicate's batch is split over d devices (`lax.pmean`).
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

__all__ = ["DRIFT_METRIC", "DRIFT_MODELS", "SPECTRUM_METRICS", "Experiment", "drift",
           "epoch_data", "evaluate", "init_state", "make_experiment", "make_model",
           "matrix_drift", "num_params", "optimizer_for", "recurrent_matrix", "refresh_state",
           "replicate_keys", "spectrum", "train_chunk"]

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


def recurrent_matrix(spec, variables) -> jax.Array:
  """The recurrent matrix of one replicate's flax variables (a TrainState's `params`):
  the guRNN's U(λ) (U₀ U(λ) when rebased), complex (n, n); the orthogonal RNN's
  W = expm(A(μ)), real (n, n). Raises ValueError: a model not in `DRIFT_MODELS`."""
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


def replicate_keys(spec, replicate) -> list[jax.Array]:
  """Replicate r's four keys, fold_in(fold_in(key(spec.seed), r), i): i = 0 the
  parameters, 1 the initial state at init, 2 the data, 3 training's initial states."""
  root = jax.random.fold_in(jax.random.key(spec.seed), replicate)
  return [jax.random.fold_in(root, i) for i in range(4)]


def _trainable(variables):  # the optimizer sees "params" only (not a rebased guRNN's base)
  return {"params": variables["params"]}


def init_state(spec, replicate) -> optimizers.TrainState:
  """Replicate `replicate`'s (int32 scalar) fresh state: its flax variables ("params"
  and, for a rebased guRNN, U₀ in `lnn.BASE_COLLECTION`) and the optimizer's state."""
  params_key, carry_key, _, _ = replicate_keys(spec, replicate)
  task = data.get_task(spec.task)
  x = jnp.zeros((1, task.length(spec.T), task.input_size), jnp.float32)
  variables = make_model(spec).init(params_key, x, carry_key)
  if spec.model == "lstm" and spec.lstm_forget_bias:  # flax's zeros otherwise
    cell = variables["params"]["cell"]
    forget = {**cell["hf"], "bias": jnp.full_like(cell["hf"]["bias"], spec.lstm_forget_bias)}
    variables = {**variables, "params": {**variables["params"], "cell": {**cell, "hf": forget}}}
  return optimizers.TrainState(variables, optimizer_for(spec).init(_trainable(variables)))


def refresh_state(spec, state: optimizers.TrainState) -> optimizers.TrainState:
  """A guRNN state with λ refreshed by `spec.lambda_refresh`, U unchanged: "recentre"
  (λ ← the principal logarithm's coefficients) or "rebase" (U₀ ← U₀ U(λ), λ ← 0); λ's
  optimizer state reset when `lambda_refresh_state` is "reset". Raises ValueError: a
  spec without a λ refresh."""
  refresh, _, rule = _refresh(spec)
  if refresh == "none":
    raise ValueError(f"model {spec.model!r} with lambda_refresh = "
                     f"{spec.get('lambda_refresh')!r} has no λ refresh to apply.")
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
  if rule == "reset":
    params = _trainable(variables)
    is_lam = jax.tree_util.tree_map_with_path(lambda path, _: _key(path) == "lam", params)
    opt_state = principal_branch.reset_optimizer_state(optimizer_for(spec), opt_state,
                                                       params, is_lam)
  return optimizers.TrainState(variables, opt_state)


def epoch_data(spec, source: data.Source, replicate, epoch):
  """Replicate `replicate`'s data of epoch `epoch` (an image order, (N,) int32)."""
  return source.epoch_data(replicate_keys(spec, replicate)[2], epoch)


def _shard(rows, key, parts):  # this device's share of the batch rows, its own key
  i = jax.lax.axis_index(replicas.DATA_AXIS)
  share = lambda a: jax.lax.dynamic_slice_in_dim(a, i * (a.shape[0] // parts),
                                                 a.shape[0] // parts)
  return jax.tree.map(share, rows), jax.random.fold_in(key, i)


def train_chunk(spec, source: data.Source, split: int, state, replicate, start, num,
                this_epoch, arrays):
  """Updates start, ..., start + num - 1 of one replicate (num ≤ `spec.val_every`, within
  one epoch), λ refreshed before every `lambda_refresh_every`-th. Batches come from the
  replicate's key and the update index, so a resumed run makes the uninterrupted run's
  steps. With `split` = d > 1 (inside a shard_map over `replicas.DATA_AXIS`) each device
  takes its d-th of the batch's rows and the key fold_in(key, device); gradients and
  metrics are their mean.

  Returns:
    (state, {metric: (val_every,) float32: update start + i's at i < num, 0 after}).
  """
  _, _, data_key, carry_key = replicate_keys(spec, replicate)
  model, optimizer = make_model(spec), optimizer_for(spec)
  refresh, refresh_every, _ = _refresh(spec)

  def step(u, carry):
    state, per_update = carry
    if refresh != "none":
      # u is the same for every replicate (not vmapped): a real branch, not a select.
      state = jax.lax.cond(u % refresh_every == 0, functools.partial(refresh_state, spec),
                           lambda s: s, state)
    rows = source.train_batch(data_key, u, this_epoch, arrays)
    step_key = jax.random.fold_in(carry_key, u)
    if split > 1:  # the mean of the shards' means is the whole batch's
      rows, step_key = _shard(rows, step_key, split)
    params = _trainable(state.params)

    def loss(p):  # other collections (a rebased guRNN's base) are constants of it
      out = source.metrics(model.apply({**state.params, **p}, rows[0], step_key), rows[1])
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


def evaluate(spec, source: data.Source, split: int, params, eval_set) -> dict:
  """{metric: float32 scalar}, one replicate's mean over the batches of `eval_set` (a set
  of `source`'s); split over the data axis when `source.split_eval` (as `train_chunk`)."""
  count, carry_key, batch = source.eval_batches(eval_set)
  parts, model = split if source.split_eval else 1, make_model(spec)

  def one_batch(j, sums):
    (inputs, targets), key = batch(j), carry_key
    if parts > 1:
      (inputs, targets), key = _shard((inputs, targets), key, parts)
    return jax.tree.map(jnp.add, sums, source.metrics(model.apply(params, inputs, key),
                                                      targets))

  sums = jax.lax.fori_loop(0, count, one_batch, {k: jnp.float32(0) for k in source.names})
  if parts > 1:
    sums = jax.lax.pmean(sums, replicas.DATA_AXIS)
  return {k: v / count for k, v in sums.items()}


def spectrum(spec, params) -> dict:
  """{`SPECTRUM_METRICS` name: float32 scalar}: the spectrum diagnostics of a guRNN's λ.
  Raises ValueError: a model without λ."""
  if spec.model not in LAMBDA_MODELS:
    raise ValueError(f"model {spec.model!r} has no λ; models with one: {LAMBDA_MODELS}.")
  return dict(zip(SPECTRUM_METRICS, principal_branch.spectrum_stats(
      params["params"]["cell"]["lam"])))


def drift(spec, params, initial) -> dict:
  """{`DRIFT_METRIC`: real scalar}: `matrix_drift` of the recurrent matrix from `initial`'s."""
  return {DRIFT_METRIC: matrix_drift(recurrent_matrix(spec, params),
                                     recurrent_matrix(spec, initial))}


class Experiment(NamedTuple):
  """The functions of the same names (`init`: `init_state`) of one unit, mapped over its
  replicates by `make_experiment`: arguments named `replicate`, `state`, `params` or
  `initial` (and an epoch's data) gain a leading replicate axis R, as do the outputs;
  `train_chunk` donates its state; `spectrum` and `drift` are None for models without
  them; `epoch_data` gives None for a source without epochs."""
  init: Callable
  epoch_data: Callable
  train_chunk: Callable
  evaluate: Callable
  source: data.Source
  spectrum: Callable | None = None
  drift: Callable | None = None


@functools.lru_cache(maxsize=16)
def make_experiment(spec, sharding: jax.sharding.Sharding | None = None,
                    source: data.Source | None = None) -> Experiment:
  """A unit's `Experiment`, jitted (cached per spec, sharding and source: one compile).

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
  split = sharding.mesh.shape.get(replicas.DATA_AXIS, 1)
  if spec.data_parallel not in (1, split):
    raise ValueError(f"data_parallel = {spec.data_parallel} needs a sharding whose mesh has "
                     f"a {replicas.DATA_AXIS!r} axis of that size (replicas.replicate_sharding).")
  if spec.batch_size % split or (source.split_eval and spec.eval_batch_size % split):
    raise ValueError(f"a data axis of {split} devices must divide batch_size = "
                     f"{spec.batch_size}" + (f" and eval_batch_size = {spec.eval_batch_size}"
                                             if source.split_eval else "") + ".")
  program = lambda fn, *args, axes, **kw: replicas.map_replicates(
      functools.partial(fn, *args), axes, sharding, **kw)
  # The state, epoch data and arrays are replicated along a data row.
  epochs = source.epoch_data is not None
  return Experiment(
      program(init_state, spec, axes=(0,)),
      program(epoch_data, spec, source, axes=(0, None)) if epochs else lambda r, e: None,
      program(train_chunk, spec, source, split, axes=(0, 0, None, None, 0 if epochs else None,
                                                      None), donate_argnums=(0,)),
      program(evaluate, spec, source, split, axes=(0, None)), source,
      program(spectrum, spec, axes=(0,)) if spec.model in LAMBDA_MODELS else None,
      program(drift, spec, axes=(0, 0)) if spec.model in DRIFT_MODELS else None)


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
