"""Training the RNNs of paper §4 on the adding and memory problems (SPEC §4).

One *unit* of work is (task, model, T, lambda_optimizer) trained for `num_seeds`
seeds at once: the seeds' parameters, optimizer states and data streams are stacked
on a leading axis and every step is one `jax.vmap`-ed, jitted program. Training runs
in chunks of `val_every` updates (a `lax.fori_loop` inside one jit); after each chunk
the validation loss on a fixed subsample is appended to `WORKDIR/results.jsonl`
(`lie_unitary.records`), and every `checkpoint_every` updates the stacked state is
saved, so a killed run resumes where it stopped. At the end the full validation and
test sets are evaluated.

Data: training batch u of seed s is drawn from fold_in(data_key_s, u mod
(num_train / batch_size)), i.e. a fixed training set of `num_train` sequences per
seed visited in the same order every epoch (`num_train = 0`: fresh data every
update). Validation and test sets are fixed (`eval_seed`), the same for every seed
and model, generated batch by batch inside jit and never stored.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import time
from typing import Any, Callable, NamedTuple

import flax.linen as nn
import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np
import optax

from lie_unitary.experiments import records, workers
from lie_unitary.experiments.rnn import tasks
from lie_unitary import nn as lnn

__all__ = [
    "MODELS", "HParams", "TrainState", "make_experiment", "make_model", "make_optimizer",
    "resolve_hparams", "train_and_evaluate",
]

UNITARY_MODELS = ("gurnn", "gurnn_beta", "urnn")
MODELS = ("gurnn", "gurnn_beta", "urnn", "lstm", "irnn", "tanh", "free")
# The paper's (and the original runs') per-model settings (SPEC §4), used where the
# config leaves a field at its "auto" value (-1).
_BETA = {"adding": 1.4, "memory": 1.05}
_URNN_SIZE = {"adding": 512, "memory": 128}


@dataclasses.dataclass(frozen=True)
class HParams:
  """Everything one unit of training needs, resolved and frozen (see `resolve_hparams`)."""
  task: str
  model: str
  T: int
  hidden_size: int
  beta: float
  activation: str
  h0: str
  learning_rate: float
  lambda_optimizer: str
  clip_value: float
  rmsprop_decay: float
  rmsprop_eps: float
  rmsprop_initial_scale: float
  batch_size: int
  num_train: int
  num_updates: int
  val_every: int
  val_size: int
  eval_size: int
  eval_batch_size: int
  num_seeds: int
  seed: int
  eval_seed: int
  unroll: int = 1
  lambda_init_std: float = 1.0
  lambda_init: str = "normal"
  lambda_learning_rate: float = -1.0
  lr_drops: tuple[int, ...] = ()
  lr_drop_factor: float = 0.1


def resolve_hparams(config, model: str, T: int) -> HParams:
  """Fills the config's auto (-1) fields with the paper's per-model choices.

  hidden_size: 30 (complex units for guRNN/free, real for LSTM/IRNN/tanh), ruRNN 512
  (adding) / 128 (memory). beta: 1 for gurnn, 1.4 (adding) / 1.05 (memory) for
  gurnn_beta and free, 1 otherwise. learning_rate: 1e-4 for IRNN, 1e-3 otherwise.
  clip_value: none for the unitary models and free, 1.0 (by value) for the others.
  activation: relu (adding) / tanh (memory) for gurnn, gurnn_beta and free.

  Raises:
    ValueError: for an unknown model, task or lambda optimizer.
  """
  task = tasks.get_task(config.task).name
  if model not in MODELS:
    raise ValueError(f"unknown model {model!r}; choose from {MODELS}.")
  if config.lambda_optimizer not in ("rmsprop", "sgd"):
    raise ValueError(f"lambda_optimizer must be 'rmsprop' or 'sgd'; got "
                     f"{config.lambda_optimizer!r}.")
  if config.lambda_init not in ("normal", "phases"):
    raise ValueError(f"lambda_init must be 'normal' or 'phases'; got {config.lambda_init!r}.")
  auto = lambda value, default: default if value < 0 else value
  size = _URNN_SIZE[task] if model == "urnn" else 30
  beta = _BETA[task] if model in ("gurnn_beta", "free") else 1.0
  lr = 1e-4 if model == "irnn" else 1e-3
  # free is the guRNN's ablation (same recurrence, no constraint): trained like it.
  clip = 0.0 if model in UNITARY_MODELS + ("free",) else 1.0
  activation = config.activation or ("relu" if task == "adding" else "tanh")
  return HParams(
      task=task, model=model, T=int(T), hidden_size=int(auto(config.hidden_size, size)),
      beta=float(auto(config.beta, beta)), activation=activation, h0=config.h0,
      learning_rate=float(auto(config.learning_rate, lr)),
      lambda_learning_rate=float(auto(config.lambda_learning_rate,
                                      auto(config.learning_rate, lr))),
      lambda_optimizer=config.lambda_optimizer,
      clip_value=float(auto(config.clip_value, clip)), rmsprop_decay=config.rmsprop_decay,
      rmsprop_eps=config.rmsprop_eps, rmsprop_initial_scale=config.rmsprop_initial_scale,
      batch_size=config.batch_size, num_train=config.num_train,
      num_updates=config.num_updates, val_every=config.val_every, val_size=config.val_size,
      eval_size=config.eval_size, eval_batch_size=config.eval_batch_size,
      num_seeds=config.num_seeds, seed=config.seed, eval_seed=config.eval_seed,
      unroll=config.unroll, lambda_init_std=config.lambda_init_std,
      lambda_init=config.lambda_init, lr_drops=tuple(_parse_list(config.lr_drops, int)),
      lr_drop_factor=float(config.lr_drop_factor))


def make_model(hp: HParams) -> lnn.SequenceModel:
  """The `SequenceModel` (cell + scan + readout) of `hp.model` for `hp.task`."""
  task = tasks.get_task(hp.task)
  n = hp.hidden_size
  if hp.model in ("gurnn", "gurnn_beta", "free"):
    if hp.lambda_init == "phases":
      lambda_init = lnn.diagonal_phases_init()
    elif hp.lambda_init_std > 0:
      lambda_init = nn.initializers.normal(stddev=hp.lambda_init_std)
    else:
      lambda_init = nn.initializers.zeros
    cell = lnn.GURNNCell(n, beta=hp.beta, activation=hp.activation, h0=hp.h0,
                         unconstrained=hp.model == "free", lambda_init=lambda_init)
  elif hp.model == "urnn":
    cell = lnn.URNNCell(n, h0=hp.h0)
  elif hp.model == "lstm":
    cell = nn.OptimizedLSTMCell(n)
  elif hp.model == "irnn":
    cell = lnn.SimpleRNNCell.irnn(n)
  elif hp.model == "tanh":
    cell = lnn.SimpleRNNCell.tanh_rnn(n)
  else:
    raise ValueError(f"unknown model {hp.model!r}; choose from {MODELS}.")
  return lnn.SequenceModel(cell, task.output_size, task.readout, unroll=hp.unroll)


def _is_lambda(path) -> bool:
  return getattr(path[-1], "key", None) == "lam"


def make_optimizer(hp: HParams) -> optax.GradientTransformation:
  """RMSProp (no momentum) on everything, optionally clipped by value first. The
  guRNN's λ, unclipped, gets `lambda_optimizer` at `lambda_learning_rate`: plain SGD
  (as the original code) or its own RMSProp; with RMSProp at the shared learning rate
  it is simply part of the rest."""
  rmsprop = lambda lr: optax.rmsprop(lr, decay=hp.rmsprop_decay, eps=hp.rmsprop_eps,
                                     initial_scale=hp.rmsprop_initial_scale)
  rest = rmsprop(hp.learning_rate)
  if hp.clip_value > 0:
    rest = optax.chain(optax.clip(hp.clip_value), rest)
  if hp.lambda_optimizer == "rmsprop" and hp.lambda_learning_rate == hp.learning_rate:
    return rest
  lam = (optax.sgd if hp.lambda_optimizer == "sgd" else rmsprop)(hp.lambda_learning_rate)
  labels = lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: "lambda" if _is_lambda(path) else "rest", params)
  return optax.multi_transform({"rest": rest, "lambda": lam}, labels)


class TrainState(NamedTuple):
  """One seed's parameters and optimizer state (stacked over seeds in training)."""
  params: Any
  opt_state: Any


class Experiment(NamedTuple):
  """Pure functions of one unit, all batched over seeds (leading axis R).

  Attributes:
    init: keys_R -> TrainState_R.
    train_chunk: (TrainState_R, keys_R, start update, number of updates) ->
      (TrainState_R, mean training loss per seed (R,)); jitted, state donated.
    evaluate: (params_R, which ('val' or 'test'), number of sequences) -> (R,) mean loss.
    loss_fn: (params, x, targets, carry_key) -> scalar, for one seed.
  """
  init: Callable
  train_chunk: Callable
  evaluate: Callable
  loss_fn: Callable


def _seed_keys(hp: HParams):
  """Per-seed root keys (R,): fold_in(key(seed), s)."""
  root = jax.random.key(hp.seed)
  return jax.vmap(lambda s: jax.random.fold_in(root, s))(jnp.arange(hp.num_seeds))


def make_experiment(hp: HParams) -> Experiment:
  """Builds the jitted, seed-vmapped init / train / evaluate functions of one unit.

  Cached on the fields that shape the program (not `num_updates`), so a resumed or
  extended run in the same process reuses the compiled functions.
  """
  return _make_experiment(dataclasses.replace(hp, num_updates=0))


@functools.lru_cache(maxsize=16)
def _make_experiment(hp: HParams) -> Experiment:
  task = tasks.get_task(hp.task)
  model = make_model(hp)
  optimizer = make_optimizer(hp)
  L = task.length(hp.T)
  num_batches = hp.num_train // hp.batch_size if hp.num_train > 0 else 0

  def loss_fn(params, x, targets, carry_key):
    return task.loss(model.apply(params, x, carry_key), targets)

  def init(seed_key):
    init_key = jax.random.fold_in(seed_key, 0)
    x = jnp.zeros((1, L, task.input_size), jnp.float32)
    params = model.init(init_key, x, jax.random.fold_in(seed_key, 1))
    return TrainState(params, optimizer.init(params))

  def train_chunk(state, seed_key, start, num):
    data_key = jax.random.fold_in(seed_key, 2)
    carry_key = jax.random.fold_in(seed_key, 3)

    def step(u, carry):
      state, loss_sum = carry
      batch_index = u % num_batches if num_batches else u
      x, targets = task.sample(jax.random.fold_in(data_key, batch_index), hp.batch_size, hp.T)
      loss, grads = jax.value_and_grad(loss_fn)(state.params, x, targets,
                                                jax.random.fold_in(carry_key, u))
      updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
      if hp.lr_drops:
        # Every optimizer here ends in "× learning rate", so scaling the updates is
        # scaling the learning rate; the optimizer state (and checkpoints) are unchanged.
        scale = hp.lr_drop_factor ** sum((u >= d).astype(jnp.float32) for d in hp.lr_drops)
        updates = jax.tree.map(lambda x: x * scale.astype(x.dtype), updates)
      return TrainState(optax.apply_updates(state.params, updates), opt_state), loss_sum + loss

    state, loss_sum = jax.lax.fori_loop(start, start + num, step, (state, jnp.float32(0)))
    return state, loss_sum / num

  def evaluate(params, salt, num_batches):
    key = jax.random.fold_in(jax.random.key(hp.eval_seed), salt)
    carry_key = jax.random.fold_in(key, 2**30)

    def one_batch(j, total):
      x, targets = task.sample(jax.random.fold_in(key, j), hp.eval_batch_size, hp.T)
      return total + loss_fn(params, x, targets, carry_key)

    return jax.lax.fori_loop(0, num_batches, one_batch, jnp.float32(0)) / num_batches

  v_init = jax.jit(jax.vmap(init))
  v_train = jax.jit(jax.vmap(train_chunk, in_axes=(0, 0, None, None)), donate_argnums=0)
  v_eval = jax.jit(jax.vmap(evaluate, in_axes=(0, None, None)))

  def evaluate_sets(params, which, num_sequences):
    if num_sequences % hp.eval_batch_size:
      raise ValueError(f"{num_sequences=} must be a multiple of {hp.eval_batch_size=}.")
    return v_eval(params, {"val": 1, "test": 2}[which], num_sequences // hp.eval_batch_size)

  return Experiment(v_init, v_train, evaluate_sets, loss_fn)


# Running, recording and resuming ------------------------------------------------------


def _unit_name(hp: HParams) -> str:
  return f"{hp.task}_T{hp.T}_{hp.model}_{hp.lambda_optimizer}"


def _key(kind, hp: HParams, seed, update):
  return (kind, hp.task, hp.model, hp.T, hp.lambda_optimizer, seed, update)


KEY_FIELDS = ("kind", "task", "model", "T", "lambda_optimizer", "seed", "update")


def _save_checkpoint(path, state, update, elapsed):
  blob = flax.serialization.to_bytes({"state": jax.device_get(state), "update": update,
                                      "elapsed": elapsed})
  tmp = path + ".tmp"
  with open(tmp, "wb") as f:
    f.write(blob)
    f.flush()
    os.fsync(f.fileno())
  os.replace(tmp, path)


def _load_checkpoint(path, state):
  with open(path, "rb") as f:
    blob = flax.serialization.from_bytes(
        {"state": jax.device_get(state), "update": 0, "elapsed": 0.0}, f.read())
  shapes = lambda tree: [np.shape(x) for x in jax.tree.leaves(tree)]
  if shapes(blob["state"]) != shapes(state):
    raise ValueError(f"checkpoint {path} does not fit this config (num_seeds, hidden_size?): "
                     "use another workdir or delete it.")
  return (jax.tree.map(jnp.asarray, blob["state"]), int(blob["update"]),
          float(blob["elapsed"]))


def _parse_list(value, cast) -> list:
  if isinstance(value, (list, tuple)):
    return [cast(v) for v in value]
  return [cast(v.strip()) for v in str(value).split(",") if v.strip()]


def units(config) -> list[HParams]:
  """The (model, T) grid of a config: `config.model` and `config.T` are comma lists."""
  return [resolve_hparams(config, m, T) for T in _parse_list(config.T, int)
          for m in _parse_list(config.model, str)]


def _hparam_fields(hp: HParams) -> dict:
  return {"hidden_size": hp.hidden_size, "beta": hp.beta, "activation": hp.activation,
          "learning_rate": hp.learning_rate, "clip_value": hp.clip_value,
          "lambda_learning_rate": hp.lambda_learning_rate, "lambda_init": hp.lambda_init,
          "lambda_init_std": hp.lambda_init_std,
          "lr_drops": list(hp.lr_drops), "lr_drop_factor": hp.lr_drop_factor,
          "batch_size": hp.batch_size}


def train_unit(hp: HParams, workdir: str, printer=print) -> list[dict]:
  """Trains one unit (all seeds), appending records; resumes from its checkpoint.

  Returns:
    The final records (one per seed): full validation and test losses.
  """
  results = os.path.join(workdir, "results.jsonl")
  ckpt = os.path.join(workdir, f"ckpt_{_unit_name(hp)}.msgpack")
  done = records.finished_keys(results, KEY_FIELDS)
  exp = make_experiment(hp)
  keys = _seed_keys(hp)
  state = exp.init(keys)
  update, elapsed = 0, 0.0
  if os.path.exists(ckpt):
    state, update, elapsed = _load_checkpoint(ckpt, state)
    printer(f"{_unit_name(hp)}: resumed at update {update} ({elapsed:.0f}s so far)")
  baseline = tasks.get_task(hp.task).baseline(hp.T)

  def log(kind, extra_by_seed):
    recs = []
    for s in range(hp.num_seeds):
      if _key(kind, hp, s, update) in done:
        continue
      rec = {"kind": kind, "task": hp.task, "model": hp.model, "T": hp.T,
             "lambda_optimizer": hp.lambda_optimizer, "seed": s, "update": update,
             "seconds": round(elapsed, 3), **_hparam_fields(hp)}
      rec.update({k: float(v[s]) for k, v in extra_by_seed.items()})
      recs.append(rec)
    records.append_records(results, recs)
    return recs

  if update == 0:
    val = np.asarray(exp.evaluate(state.params, "val", hp.val_size))
    log("val", {"val_loss": val})
  last_ckpt = update
  # A checkpoint (and a progress line) about every 5% of the run.
  ckpt_every = hp.val_every * max(1, hp.num_updates // (20 * hp.val_every))
  while update < hp.num_updates:
    t0 = time.perf_counter()
    num = min(hp.val_every, hp.num_updates - update)
    state, train_loss = exp.train_chunk(state, keys, update, num)
    val = np.asarray(exp.evaluate(state.params, "val", hp.val_size))
    elapsed += time.perf_counter() - t0
    update += num
    log("val", {"val_loss": val, "train_loss": np.asarray(train_loss)})
    if update - last_ckpt >= ckpt_every or update >= hp.num_updates:
      _save_checkpoint(ckpt, state, update, elapsed)
      last_ckpt = update
      rate = update / max(elapsed, 1e-9)
      printer(f"{_unit_name(hp)}: update {update}/{hp.num_updates}, val loss median "
              f"{np.median(val):.4g} (seeds {', '.join(f'{v:.3g}' for v in val)}; "
              f"baseline {baseline:.4g}), {elapsed:.0f}s, "
              f"ETA {(hp.num_updates - update) / rate:.0f}s")
  t0 = time.perf_counter()
  val = np.asarray(exp.evaluate(state.params, "val", hp.eval_size))
  test = np.asarray(exp.evaluate(state.params, "test", hp.eval_size))
  elapsed += time.perf_counter() - t0
  return log("final", {"val_loss": val, "test_loss": test})


# Relative cost per step and state unit² (matmul widths: LSTM 4 gates, the complex
# pair 2n) to start the longest units first when worker processes share them.
_COST = {"lstm": 8, "gurnn": 4, "gurnn_beta": 4, "free": 4, "urnn": 4, "irnn": 1, "tanh": 1}


def _cost(hp: HParams) -> float:
  return hp.num_updates * hp.T * hp.num_seeds * hp.hidden_size ** 2 * _COST[hp.model]


def train_and_evaluate(config, workdir: str, printer=print) -> None:
  """Runs every unit of `config` (see `units`) into `workdir`, skipping finished ones.

  In a worker process of `lie_unitary.workers` (the launcher's ``--num_workers``),
  takes only the units no other worker has claimed, longest first.
  """
  os.makedirs(workdir, exist_ok=True)
  all_units = units(config)
  claim = workers.claimer_from_env()
  if claim is not None:
    all_units = sorted(all_units, key=_cost, reverse=True)
    prefix, base_printer = workers.worker_prefix(), printer
    printer = lambda line: base_printer(prefix + line)
  progress = records.Progress(len(all_units), printer, workers.num_workers())
  results = os.path.join(workdir, "results.jsonl")
  for hp in all_units:
    finals = {k for k in records.finished_keys(results, KEY_FIELDS) if k[0] == "final"}
    if all(_key("final", hp, s, hp.num_updates) in finals for s in range(hp.num_seeds)):
      progress.skip(_unit_name(hp))
      continue
    if claim is not None and not claim(_unit_name(hp)):
      progress.skip(_unit_name(hp), "taken by another worker")
      continue
    train_unit(hp, workdir, printer)
    progress.finish(_unit_name(hp))
