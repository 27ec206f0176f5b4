"""The RNN family's model, optimizer and one replicate's training as plain functions of
the unit's spec; `make_experiment` maps them over the replicates. Replicate r's keys come
from fold_in(key(seed), r) inside the programs: its numbers depend neither on the other
replicates nor on the devices; `data_parallel` = d > 1 splits its batch over d devices."""

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

__all__ = ["Experiment", "diagnostics", "evaluate", "init_state", "make_experiment",
           "make_model", "matrix_drift", "num_params", "optimizer_for", "recurrent_matrix",
           "refresh_state", "replicate_keys", "train_chunk"]

_DRIFT_MODELS = LAMBDA_MODELS + ORTHOGONAL_MODELS  # the models with a recurrent matrix of note


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
  else:
    cells = {"orthogonal": lambda: lnn.OrthogonalRNNCell(n, expm_method=spec.orthogonal_expm),
             "lstm": lambda: nn.OptimizedLSTMCell(n), "urnn": lambda: lnn.URNNCell(n, h0=spec.h0),
             "irnn": lambda: lnn.SimpleRNNCell.irnn(n),
             "tanh": lambda: lnn.SimpleRNNCell.tanh_rnn(n)}
    if spec.model not in cells:
      raise ValueError(f"unknown model {spec.model!r}; choose from {MODELS}.")
    cell = cells[spec.model]()
  readout = {}
  if spec.readout_init == "torch":  # a complex state: 2n reals
    kernel, bias = lnn.torch_linear_init(2 * n if spec.model in H0_MODELS else n)
    readout = dict(readout_kernel_init=kernel, readout_bias_init=bias)
  return lnn.SequenceModel(cell, task.output_size, task.readout, unroll=spec.unroll, **readout)


_key = lambda path: getattr(path[-1], "key", None)  # a parameter tree leaf's name


def optimizer_for(spec) -> optax.GradientTransformation:
  """RMSProp clipped as the spec says; the guRNN's λ (unclipped) gets `lambda_optimizer`
  at `lambda_learning_rate`, the orthogonal RNN's μ its own RMSProp at that rate; every
  rate follows `lr_drops`."""
  drops = tuple(spec.lr_drops)
  # A drop at d scales update d and later ones (listed twice: twice); none: a constant
  # (no step counter in the optimizer state).
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
  """One replicate's recurrent matrix: the guRNN's U(λ) (U₀ U(λ) when rebased), complex
  (n, n), or the orthogonal RNN's expm(A(μ)), real (n, n). Raises ValueError: other models."""
  if spec.model not in _DRIFT_MODELS:
    raise ValueError(f"model {spec.model!r} has no recurrent matrix of its own; models "
                     f"with one: {_DRIFT_MODELS}.")
  method = (lambda m: m.cell.unitary()) if spec.model in LAMBDA_MODELS else (
      lambda m: m.cell.orthogonal())
  return make_model(spec).apply(variables, method=method)


def matrix_drift(matrix, initial) -> jax.Array:
  """‖M − M₀‖_F / √n of (..., n, n) matrices, real: for unitary M, M₀ the root mean
  square of how far each column moved (0 to 2)."""
  return jnp.sqrt(jnp.sum(jnp.abs(matrix - initial) ** 2, axis=(-2, -1)) / matrix.shape[-1])


def replicate_keys(spec, replicate) -> list[jax.Array]:
  """Replicate r's keys fold_in(fold_in(key(seed), r), i): the parameters, init's initial
  state, the data, training's initial states."""
  root = jax.random.fold_in(jax.random.key(spec.seed), replicate)
  return [jax.random.fold_in(root, i) for i in range(4)]


def _trainable(variables):  # the optimizer sees "params" only (not a rebased guRNN's base)
  return {"params": variables["params"]}


def init_state(spec, replicate) -> optimizers.TrainState:
  """Replicate `replicate`'s (int32 scalar) fresh variables and optimizer state."""
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
  """The state with λ refreshed by `spec.lambda_refresh`, U unchanged: "recentre" (λ ← the
  principal logarithm's) or "rebase" (U₀ ← U₀ U(λ), λ ← 0); λ's optimizer state reset
  when `lambda_refresh_state` says. Raises ValueError: a spec without a λ refresh."""
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


def _shard(rows, key, parts):  # this device's share of the batch rows, its own key
  i = jax.lax.axis_index(replicas.DATA_AXIS)
  share = lambda a: jax.lax.dynamic_slice_in_dim(a, i * (a.shape[0] // parts),
                                                 a.shape[0] // parts)
  return jax.tree.map(share, rows), jax.random.fold_in(key, i)


def train_chunk(spec, source: data.Source, split: int, state, replicate, start, num,
                this_epoch, arrays):
  """Updates start .. start + num - 1 (num ≤ val_every, one epoch) of one replicate, λ
  refreshed before every `lambda_refresh_every`-th; batches from the key and the update
  index (a resumed run repeats the uninterrupted one). `split` = d > 1 (in a shard_map):
  each device takes its d-th of the rows, gradients and metrics their mean. Returns
  (state, {metric: (val_every,) float32, update start + i's at i < num, 0 after})."""
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
  """{metric: float32 scalar}: one replicate's mean over `eval_set`'s batches (split over
  the data axis when `source.split_eval`)."""
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


def diagnostics(spec, params, initial) -> dict:
  """{name: float32 scalar}: λ's `workdir.SPECTRUM_FIELDS` (guRNNs with λ), then
  `workdir.DRIFT_FIELD`, the recurrent matrix's `matrix_drift` from `initial`'s.
  Raises ValueError: a model without a recurrent matrix of its own."""
  out = {}
  if spec.model in LAMBDA_MODELS:
    out.update(zip(workdir.SPECTRUM_FIELDS, principal_branch.spectrum_stats(
        params["params"]["cell"]["lam"])))
  out[workdir.DRIFT_FIELD] = matrix_drift(recurrent_matrix(spec, params),
                                          recurrent_matrix(spec, initial))
  return out


class Experiment(NamedTuple):
  """The functions of the same names (`init`: `init_state`; `epoch_data`: (replicate,
  epoch) -> the source's epoch data, an image order) mapped over a unit's replicates:
  `replicate`, `state`, `params`, `initial`, an epoch's data and the outputs gain a
  leading axis R; `train_chunk` donates its state; None: a model without it."""
  init: Callable
  epoch_data: Callable
  train_chunk: Callable
  evaluate: Callable
  source: data.Source
  diagnostics: Callable | None = None


@functools.lru_cache(maxsize=16)
def make_experiment(spec, sharding: jax.sharding.Sharding | None = None,
                    source: data.Source | None = None) -> Experiment:
  """A unit's `Experiment`, jitted and cached, for its frozen `spec`, the replicates'
  `sharding` (None: `replicas.replicate_sharding()`) and `source` (None: synthetic).

  Raises:
    ValueError: data_parallel not the data axis, a batch size it does not divide.
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
      program(lambda r, e: source.epoch_data(replicate_keys(spec, r)[2], e), axes=(0, None))
      if epochs else lambda r, e: None,
      program(train_chunk, spec, source, split, axes=(0, 0, None, None, 0 if epochs else None,
                                                      None), donate_argnums=(0,)),
      program(evaluate, spec, source, split, axes=(0, None)), source,
      program(diagnostics, spec, axes=(0, 0)) if spec.model in _DRIFT_MODELS else None)


def num_params(model: str, hidden_size: int, input_size: int, output_size: int,
               activation: str = "relu") -> int:
  """Trainable reals of a guRNN, orthogonal or LSTM `SequenceModel` with a last-state
  readout (a constrained matrix: its manifold's dimension). Raises ValueError: another
  model, or a size not an integer ≥ 1."""
  if model in LAMBDA_MODELS:
    return lnn.gurnn_num_params(hidden_size, input_size, output_size, activation)
  if model in ORTHOGONAL_MODELS:
    return lnn.orthogonal_rnn_num_params(hidden_size, input_size, output_size)
  if model == "lstm":  # flax's OptimizedLSTMCell: 4 gates of D·h + h·h + h, then the readout
    h = hidden_size
    return 4 * h * (input_size + h + 1) + (h + 1) * output_size
  raise ValueError(f"num_params counts {LAMBDA_MODELS + ORTHOGONAL_MODELS + ('lstm',)}; "
                   f"got {model!r}.")
