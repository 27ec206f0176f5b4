"""The RNN family (paper §4, sequential images): a unit is one (model, T, seed), its
replicates trained together, replicate r from fold_in(key(seed), r) whatever the devices.
"val" records (step 0, every `val_every`): validation metrics (images: ``test_*``, ``epoch``),
mean ``train_*``, λ's spectrum, ``u_drift`` = ‖U − U₀‖_F / √n; "final": full val/test losses."""

import functools
import sys
import types

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from lie_unitary import nn as lnn
from lie_unitary import principal_branch
from lie_unitary.experiments import fields as F
from lie_unitary.experiments import loop
from lie_unitary.experiments import optimizers
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import config as config_lib
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import images
from lie_unitary.experiments.rnn.report import write_report as write_report

NAME = "rnn"

_DRIFT_MODELS = config_lib.LAMBDA_MODELS + config_lib.ORTHOGONAL_MODELS  # a recurrent matrix
_LAUNCH_FIELDS = ("model", "T", "seeds", "models")  # which units; each unit has its own


def data_parallel(config) -> int:
  """`config.data_parallel`, or for 0 the most devices that divide the device count and batches."""
  if config.data_parallel:
    return config.data_parallel
  count = jax.device_count()
  sizes = [config.batch_size] + [config.eval_batch_size] * (config.task in data.IMAGE_TASKS)
  return max(d for d in range(1, count + 1) if count % d == 0 and not any(s % d for s in sizes))


def validate_config(config) -> None:
  """Raises runner.ConfigError naming the first bad field (image tasks: or missing files)."""
  F.validate(config, config_lib.FIELDS)
  images_task = config.task in data.IMAGE_TASKS
  expected = config_lib.image_models() if images_task else config_lib.paper_models(config.task)
  if not isinstance(config.models, (ml_collections.ConfigDict, dict)):
    F.fail("models", config.models, "a table like `paper_models(task)`'s")
  _check_models_made_for_task(config)
  F.validate(config.models, {m: F.Field(None, "") for m in expected}, prefix="models.")
  for m, default in expected.items():
    F.validate(config.models[m], {k: config_lib.MODEL_FIELDS[k] for k in default.keys()},
               prefix=f"models.{m}.")
  if data.get_task(config.task).name == "adding" and min(config.T) < 2:
    F.fail("T", config.T, "integers ≥ 2 for the adding problem")
  if 0 < config.num_train < config.batch_size:
    F.fail("num_train", config.num_train, f"0 (fresh data) or ≥ batch_size = {config.batch_size}")
  for field in () if images_task else ("val_size", "eval_size"):
    if config[field] % config.eval_batch_size:
      F.fail(field, config[field], f"a multiple of eval_batch_size = {config.eval_batch_size}")
  for size in ("batch_size", "eval_batch_size") if images_task else ("batch_size",):
    if config[size] % data_parallel(config):
      F.fail("data_parallel", config.data_parallel, f"a divisor of {size} = {config[size]}")
  if jax.device_count() % data_parallel(config):
    F.fail("data_parallel", config.data_parallel, f"a divisor of the device count, "
           f"{jax.device_count()} (the launcher's --cpu_devices, --num_processes)")
  if not images_task:
    if config.param_budget:
      F.fail("param_budget", config.param_budget, "'': a budget sizes the image tasks' models")
    return
  if any(m not in config_lib.IMAGE_MODELS for m in config.model):
    F.fail("model", config.model, f"models of the image tasks, {config_lib.IMAGE_MODELS}")
  if len(config.T) != 1:
    F.fail("T", config.T, "one T for an image task: its pixel count, e.g. (784,)")
  if config.param_budget and any(config.models[m].hidden_size != d.hidden_size
                                 for m, d in expected.items()):  # the budget would win
    F.fail("param_budget", config.param_budget, "'' where a model's hidden_size is set")
  if config.num_validation % config.eval_batch_size:
    F.fail("eval_batch_size", config.eval_batch_size,
           f"a divisor of num_validation = {config.num_validation}")
  try:  # the files must exist, and fit the sizes, before anything is written
    try:
      folder = images.resolve_data_dir(config.dataset, config.data_dir)
    except FileNotFoundError:
      if not (config.download and config.dataset in images.DATASETS):
        raise
      from lie_unitary.experiments.rnn import download
      folder = download.download(config.dataset, config.data_dir or None)  # checks the files
    num_train, num_test, pixels = images.image_counts(folder)
  except (OSError, ValueError) as e:  # a missing or bad file, a failed download
    field = "data_dir" if config.data_dir else "dataset"
    raise F.ConfigError(f"config.{field} = {config[field]!r}: {' '.join(str(e).split())}"
                        ) from e
  if config.T[0] != pixels:
    F.fail("T", config.T, f"({pixels},), the pixel count of the images in {folder}")
  if not 0 < config.num_validation < num_train:
    F.fail("num_validation", config.num_validation, f"1..{num_train - 1} ({folder} holds "
           f"{num_train} training images)")
  if num_train - config.num_validation < config.batch_size:
    F.fail("batch_size", config.batch_size, f"at most the {num_train - config.num_validation} "
           f"training images beside num_validation = {config.num_validation}")
  if num_test % config.eval_batch_size:
    F.fail("eval_batch_size", config.eval_batch_size,
           f"a divisor of the {num_test} test images in {folder}")


def _check_models_made_for_task(config) -> None:
  """Fails a `models` table made for another task (``--config=adding --config.task=memory``
  would run the memory problem with the adding problem's β and activation)."""
  task = data.get_task(config.task).name
  models = {m: dict(entry) if isinstance(entry, (dict, ml_collections.ConfigDict)) else entry
            for m, entry in config.models.items()}
  if task in ("adding", "memory"):
    if set(models) == set(config_lib.image_models()):
      F.fail("task", config.task, "an image task ('pixel', 'permuted'): config.models is the "
             "image tasks' table (`image_models`); load --config=adding or --config=memory "
             "for the paper's")
    other = {"adding": "memory", "memory": "adding"}[task]
    if models == config_lib.paper_models(other).to_dict():  # the two tables differ
      F.fail("task", config.task, f"{other!r}: config.models is `paper_models({other!r})`, "
             f"unchanged; load --config={task} for the {task} problem's models, or set "
             f"config.models = paper_models({task!r})")
  elif set(models) == set(config_lib.paper_models("adding")):
    F.fail("task", config.task, "'adding' or 'memory': config.models is the paper's table "
           "(`paper_models`); load --config=pixel_mnist or --config=permuted_mnist for the "
           "image tasks'")


def budget_hidden_size(model: str, budget: str) -> int:
  """The hidden size of image `model` whose `num_params` is nearest expRNN's orthogonal RNN's
  at `budget` (ties: the smaller). Raises ValueError: unknown budget or model."""
  if budget not in config_lib.BUDGETS:
    raise ValueError(f"unknown parameter budget {budget!r}; expected one of "
                     f"{tuple(config_lib.BUDGETS)}.")
  size = config_lib.BUDGETS[budget]["orthogonal"]
  target = num_params("orthogonal", size, 1, 10)
  # The guRNN's activation modReLU; every model has at least the orthogonal RNN's n² / 2 reals.
  return min(range(2, 2 * size + 2),
             key=lambda n: abs(num_params(model, n, 1, 10, "modrelu") - target))


def num_params(model: str, hidden_size: int, input_size: int, output_size: int,
               activation: str = "relu") -> int:
  """Trainable reals (a manifold: its dimension) of a guRNN, orthogonal or LSTM; else ValueError."""
  if model in config_lib.LAMBDA_MODELS:
    return lnn.gurnn_num_params(hidden_size, input_size, output_size, activation)
  if model in config_lib.ORTHOGONAL_MODELS:
    return lnn.orthogonal_rnn_num_params(hidden_size, input_size, output_size)
  if model == "lstm":  # flax's OptimizedLSTMCell: 4 gates of D·h + h·h + h, then the readout
    return 4 * hidden_size * (input_size + hidden_size + 1) + (hidden_size + 1) * output_size
  raise ValueError(f"num_params counts {_DRIFT_MODELS + ('lstm',)}; got {model!r}.")


def make_unit(config, model: str, T: int, seed: int) -> F.Unit:
  """The unit of (model, T, seed) of a validated config: its settings resolved, its identity."""
  task = data.get_task(config.task).name
  table = {k: f for k, f in config_lib.FIELDS.items() if k not in _LAUNCH_FIELDS}
  values = {**{k: config[k] for k in table}, "task": task, "data_parallel": data_parallel(config)}
  entry = config.models[model].to_dict()
  if config.task in data.IMAGE_TASKS and config.param_budget:
    entry["hidden_size"] = budget_hidden_size(model, config.param_budget)
  if config.complex_product == "auto" and model in config_lib.LAMBDA_MODELS:  # as it runs
    values["complex_product"] = lnn.GURNNCell(
        entry["hidden_size"], activation=entry["activation"]).resolved_complex_product()
  fields = {"task": task, "model": model, "T": int(T), "seed": int(seed),
            **F.identity(values, table, model, config),
            **F.identity(entry, {k: config_lib.MODEL_FIELDS[k] for k in entry})}
  spec = F.resolved(values, **entry, model=model, T=int(T), seed=int(seed))
  weight = 8 if model == "lstm" else 4 if model in config_lib.H0_MODELS else 1  # per step, n²
  cost = config.num_updates * spec.T * spec.num_replicates * spec.hidden_size ** 2 * weight
  return F.Unit(name=f"{task} T={spec.T} {model}",
              fields={k: (list(v) if isinstance(v, tuple) else v) for k, v in fields.items()},
              target_step=config.num_updates, cost=float(cost), spec=spec)


def units(config) -> list[F.Unit]:
  """One unit per (T, model, seed) of a validated config, in that order."""
  return [make_unit(config, model, T, seed)
          for T in config.T for model in config.model for seed in config.seeds]


def run_unit(config, unit: F.Unit, ctx: runner.UnitContext) -> None:
  """Trains (or resumes) a unit to its target step; loop.Interrupted on a stop request."""
  replicas = replicas_lib.Replicas(unit.spec.num_replicates, replicas_lib.replicate_sharding(
      data_parallel=unit.spec.data_parallel))
  loop.train_unit(make_task(config, unit, replicas), ctx, replicas)


def make_task(config, unit: F.Unit, replicas) -> loop.Task:
  """A unit's `loop.Task` (its config checked by `validate_config`)."""
  spec, num, arrays = unit.spec, unit.spec.num_replicates, None
  if spec.task in data.IMAGE_TASKS:
    folder = images.resolve_data_dir(spec.dataset, config.data_dir)
    arrays = data.load_image_sets(folder, spec.task, spec.permutation_seed, spec.num_validation)
    arrays = jax.device_put(arrays, jax.sharding.NamedSharding(
        replicas.mesh, jax.sharding.PartitionSpec()))  # on every device
  source = (data.synthetic_source(spec) if arrays is None
            else data.image_source(spec, arrays.train_y.shape[0]))
  exp = make_experiment(spec, replicas.sharding, source)
  per_epoch, baseline = source.updates_per_epoch, data.get_task(spec.task).baseline(spec.T)
  initial = exp.init(replicas.ids).params if exp.diagnostics else None  # for the drift
  epoch_data = functools.lru_cache(maxsize=1)(lambda e: exp.epoch_data(replicas.ids, e))

  def records(kind, step, values):
    epoch = {"epoch": round(step / per_epoch, 4)} if per_epoch else {}
    return [{"kind": kind, "replicate": r, "step": step, **epoch,
             **{k: float(v[r]) for k, v in values.items()}} for r in range(num)]

  def evaluate_sets(state, sets):
    return {f"{name}_{k}": v for name, s in sets.items()
            for k, v in replicas.gather(exp.evaluate(state.params, s)).items()}

  def train(state, history, step, num_steps):
    state, per_update = exp.train_chunk(state, replicas.ids, step, num_steps,
                                        epoch_data(step // max(per_epoch, 1)), arrays)
    sums = history.setdefault("train_sums", {})
    for k, v in replicas.gather(per_update).items():  # exact: float32 summed in float64
      sums[k] = np.asarray(sums.get(k, 0.0)) + v[:, :num_steps].sum(axis=1, dtype=np.float64)
    history["train_steps"] = history.get("train_steps", 0) + num_steps
    return state, history

  def evaluate(state, history, step):  # the interval's sums start again
    sums, count = history.pop("train_sums", {}), history.pop("train_steps", 0)
    val = {**evaluate_sets(state, source.val_sets(arrays)),
           **{f"train_{k}": np.asarray(v) / count for k, v in sums.items()}}
    if exp.diagnostics:
      val.update(replicas.gather(exp.diagnostics(state.params, initial)))
    text = (", ".join(f"{k.replace('_', ' ')} {loop.median(v):.4g}" for k, v in val.items()
                      if k.startswith("val_")) + f" (median; loss baseline {baseline:.4g})"
            + loop.nonfinite_note(sums.get("loss", []), "training loss"))
    return records("val", step, val), history, text

  def finish(state, history):
    final = evaluate_sets(state, source.final_sets(arrays))
    if arrays is not None:  # trainable reals (for the report's table)
      count = sum(int(np.prod(a.shape[1:])) for a in jax.tree.leaves(state.params["params"]))
      final["num_params"] = np.full(num, count)
    return {workdir_lib.RESULTS: records("final", unit.target_step, final)}

  return loop.Task(lambda: (exp.init(replicas.ids), {}), train, evaluate, finish,
                   unit.target_step, every=spec.val_every, epoch_steps=per_epoch,
                   target_field="num_updates")


def train_and_evaluate(config, workdir: str, **kwargs) -> runner.RunSummary:
  """Runs (or resumes) every unit of an RNN config into `workdir`; keyword arguments go to
  `runner.train_and_evaluate`. Raises runner.ConfigError: a bad config field."""
  return runner.train_and_evaluate(sys.modules[__name__], config, workdir, **kwargs)


def make_model(spec) -> lnn.SequenceModel:
  """The `SequenceModel` of `spec.model` for `spec.task`. Raises ValueError: unknown model."""
  task, n = data.get_task(spec.task), spec.hidden_size
  if spec.model in config_lib.GURNN_MODELS:
    lambda_init = nn.initializers.zeros  # unused by `free`
    if spec.model in config_lib.LAMBDA_MODELS:
      if spec.lambda_init == "phases":
        r = spec.lambda_phase_range
        lambda_init = lnn.diagonal_phases_init(-r, r)
      elif spec.lambda_init in ("zeros", "haar"):
        lambda_init = principal_branch.lambda_initializer(spec.lambda_init)
      elif spec.lambda_init_std > 0:
        lambda_init = nn.initializers.normal(stddev=spec.lambda_init_std)
    cell = lnn.GURNNCell(n, beta=spec.beta, activation=spec.activation, h0=spec.h0,
                         unconstrained=spec.model == "free", lambda_init=lambda_init,
                         rebased=_refresh(spec) == "rebase", complex_product=spec.complex_product)
  else:
    cells = {"orthogonal": lambda: lnn.OrthogonalRNNCell(n, expm_method=spec.orthogonal_expm),
             "lstm": lambda: nn.OptimizedLSTMCell(n), "urnn": lambda: lnn.URNNCell(n, h0=spec.h0),
             "irnn": lambda: lnn.SimpleRNNCell.irnn(n),
             "tanh": lambda: lnn.SimpleRNNCell.tanh_rnn(n)}
    if spec.model not in cells:
      raise ValueError(f"unknown model {spec.model!r}; choose from {config_lib.MODELS}.")
    cell = cells[spec.model]()
  readout = {}
  if spec.readout_init == "torch":  # a complex state: 2n reals
    kernel, bias = lnn.torch_linear_init(2 * n if spec.model in config_lib.H0_MODELS else n)
    readout = dict(readout_kernel_init=kernel, readout_bias_init=bias)
  return lnn.SequenceModel(cell, task.output_size, task.readout, unroll=spec.unroll, **readout)


_refresh = lambda spec: spec.lambda_refresh if spec.model in config_lib.LAMBDA_MODELS else "none"
_key = lambda path: getattr(path[-1], "key", None)  # a parameter tree leaf's name
_trainable = lambda variables: {"params": variables["params"]}  # not a rebased base


def optimizer_for(spec) -> optax.GradientTransformation:
  """Clipped RMSProp; the guRNN's λ (unclipped) or orthogonal RNN's μ its own optimizer."""
  drops = tuple(spec.lr_drops)
  # A drop at d scales updates ≥ d (twice if listed twice); none: a constant (no step count).
  rate = lambda lr: optax.piecewise_constant_schedule(
      lr, {d: spec.lr_drop_factor ** drops.count(d) for d in set(drops)}) if drops else lr
  rmsprop = {k: spec[k] for k in ("rmsprop_decay", "rmsprop_eps", "rmsprop_initial_scale",
                                  "rmsprop_eps_in_sqrt")}
  rest = optimizers.make_optimizer("rmsprop", rate(spec.learning_rate),
                                 clip_value=spec.clip_value, clip_norm=spec.clip_norm, **rmsprop)
  if spec.model in config_lib.ORTHOGONAL_MODELS:
    label, leaf, kind = "mu", "mu", "rmsprop"
  elif spec.model not in config_lib.LAMBDA_MODELS or (spec.lambda_optimizer == "rmsprop" and
                                            spec.lambda_learning_rate == spec.learning_rate):
    return rest
  else:
    label, leaf, kind = "lambda", "lam", spec.lambda_optimizer
  own = optimizers.make_optimizer(kind, rate(spec.lambda_learning_rate), **rmsprop)
  labels = lambda params: jax.tree_util.tree_map_with_path(
      lambda path, _: label if _key(path) == leaf else "rest", params)
  return optax.multi_transform({"rest": rest, label: own}, labels)


def diagnostics(spec, params, initial) -> dict:
  """λ's spectrum (guRNNs with λ) and the drift ‖M − M₀‖_F / √n of the recurrent matrix M
  (U₀ U(λ) or expm(A(μ))) from `initial`'s. Raises ValueError: a model without one."""
  if spec.model not in _DRIFT_MODELS:
    raise ValueError(f"model {spec.model!r} has no recurrent matrix of its own; models "
                     f"with one: {_DRIFT_MODELS}.")
  unitary = spec.model in config_lib.LAMBDA_MODELS
  out = dict(zip(workdir_lib.SPECTRUM_FIELDS, principal_branch.spectrum_stats(
      params["params"]["cell"]["lam"]))) if unitary else {}
  method = lambda m: m.cell.unitary() if unitary else m.cell.orthogonal()
  matrix, initial = (make_model(spec).apply(v, method=method) for v in (params, initial))
  # Unitary M: the root mean square of how far each column moved (0 to 2).
  out[workdir_lib.DRIFT_FIELD] = jnp.sqrt(
      jnp.sum(jnp.abs(matrix - initial) ** 2, axis=(-2, -1)) / matrix.shape[-1])
  return out


def _keys(spec, replicate) -> list[jax.Array]:
  # fold_in(fold_in(key(seed), r), i): the parameters, init's state, data, training's states
  root = jax.random.fold_in(jax.random.key(spec.seed), replicate)
  return [jax.random.fold_in(root, i) for i in range(4)]


def init_state(spec, replicate) -> optimizers.TrainState:
  """Replicate `replicate`'s (int32 scalar) fresh variables and optimizer state."""
  params_key, carry_key, _, _ = _keys(spec, replicate)
  task = data.get_task(spec.task)
  x = jnp.zeros((1, task.length(spec.T), task.input_size), jnp.float32)
  variables = make_model(spec).init(params_key, x, carry_key)
  if spec.model == "lstm" and spec.lstm_forget_bias:  # flax's zeros otherwise
    cell = variables["params"]["cell"]
    forget = {**cell["hf"], "bias": jnp.full_like(cell["hf"]["bias"], spec.lstm_forget_bias)}
    variables = {**variables, "params": {**variables["params"], "cell": {**cell, "hf": forget}}}
  return optimizers.TrainState(variables, optimizer_for(spec).init(_trainable(variables)))


def refresh_state(spec, state: optimizers.TrainState) -> optimizers.TrainState:
  """The state with λ recentred (its principal logarithm's) or rebased (U₀ ← U₀ U(λ), λ ← 0),
  U kept. Raises ValueError: a spec without a λ refresh."""
  if _refresh(spec) == "none":
    raise ValueError(f"model {spec.model!r} with lambda_refresh = "
                     f"{spec.get('lambda_refresh')!r} has no λ refresh to apply.")
  variables, cell = dict(state.params), state.params["params"]["cell"]
  if _refresh(spec) == "recentre":
    lam = principal_branch.principal_lambdas(cell["lam"])
  else:
    col = variables[lnn.BASE_COLLECTION]
    base, lam = principal_branch.rebase(col["cell"]["base"], cell["lam"])
    variables[lnn.BASE_COLLECTION] = {**col, "cell": {**col["cell"], "base": base}}
  variables["params"] = {**variables["params"], "cell": {**cell, "lam": lam}}
  opt_state = state.opt_state
  if spec.lambda_refresh_state == "reset":  # λ's optimizer statistics
    params = _trainable(variables)
    is_lam = jax.tree_util.tree_map_with_path(lambda path, _: _key(path) == "lam", params)
    opt_state = principal_branch.reset_optimizer_state(optimizer_for(spec), opt_state,
                                                       params, is_lam)
  return optimizers.TrainState(variables, opt_state)


def _shard(rows, key, parts):  # this device's share of the batch rows, its own key
  i = jax.lax.axis_index(replicas_lib.DATA_AXIS)
  share = lambda a: jax.lax.dynamic_slice_in_dim(a, i * (a.shape[0] // parts),
                                                 a.shape[0] // parts)
  return jax.tree.map(share, rows), jax.random.fold_in(key, i)


def train_chunk(spec, source: data.Source, state, replicate, start, num, this_epoch, arrays):
  """Updates start .. start + num - 1: (state, {metric: (val_every,) update start + i's at i})."""
  _, _, data_key, carry_key = _keys(spec, replicate)
  model, optimizer, split = make_model(spec), optimizer_for(spec), spec.data_parallel

  def step(u, carry):
    state, per_update = carry
    if _refresh(spec) != "none":
      # u is the same for every replicate (not vmapped): a real branch, not a select.
      state = jax.lax.cond(u % spec.lambda_refresh_every == 0,
                           functools.partial(refresh_state, spec), lambda s: s, state)
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
      out, grads = jax.lax.pmean((out, grads), replicas_lib.DATA_AXIS)
    updates, opt_state = optimizer.update(grads, state.opt_state, params)
    variables = {**state.params, **optax.apply_updates(params, updates)}
    per_update = {k: v.at[u - start].set(out[k]) for k, v in per_update.items()}
    return optimizers.TrainState(variables, opt_state), per_update

  # Each update's metrics, summed on the host: the same sums however calls are split.
  blank = {k: jnp.zeros((spec.val_every,), jnp.float32) for k in source.names}
  return jax.lax.fori_loop(start, start + num, step, (state, blank))


def evaluate(spec, source: data.Source, params, eval_set) -> dict:
  """{metric: float32 scalar}: a replicate's mean over `eval_set`'s batches."""
  count, carry_key, batch = source.eval_batches(eval_set)
  parts, model = spec.data_parallel if source.split_eval else 1, make_model(spec)

  def one_batch(j, sums):
    (inputs, targets), key = batch(j), carry_key
    if parts > 1:
      (inputs, targets), key = _shard((inputs, targets), key, parts)
    return jax.tree.map(jnp.add, sums, source.metrics(model.apply(params, inputs, key), targets))

  sums = jax.lax.fori_loop(0, count, one_batch, {k: jnp.float32(0) for k in source.names})
  if parts > 1:
    sums = jax.lax.pmean(sums, replicas_lib.DATA_AXIS)
  return {k: v / count for k, v in sums.items()}


@functools.lru_cache(maxsize=16)
def make_experiment(spec, sharding=None, source=None) -> types.SimpleNamespace:
  """A unit's jitted programs `init`, `train_chunk` (donating), `evaluate`, `diagnostics` (or
  None), `epoch_data`, and its `source`. Raises ValueError: a data axis not `data_parallel`."""
  source = data.synthetic_source(spec) if source is None else source
  sharding = sharding or replicas_lib.replicate_sharding(data_parallel=spec.data_parallel)
  if sharding.mesh.shape.get(replicas_lib.DATA_AXIS, 1) != spec.data_parallel:
    raise ValueError(f"data_parallel = {spec.data_parallel} needs a sharding whose mesh has "
                     f"a {replicas_lib.DATA_AXIS!r} axis of that size.")
  program = lambda fn, *args, axes, **kw: replicas_lib.map_replicates(
      functools.partial(fn, spec, *args), axes, sharding, **kw)
  # The state, epoch data and arrays are replicated along a data row.
  epochs = source.epoch_data is not None
  return types.SimpleNamespace(
      init=program(init_state, axes=(0,)),
      epoch_data=program(lambda spec, r, e: source.epoch_data(_keys(spec, r)[2], e),
                         axes=(0, None)) if epochs else lambda r, e: None,
      train_chunk=program(train_chunk, source, axes=(0, 0, None, None, 0 if epochs else None,
                                                     None), donate_argnums=(0,)),
      evaluate=program(evaluate, source, axes=(0, None)), source=source,
      diagnostics=program(diagnostics, axes=(0, 0)) if spec.model in _DRIFT_MODELS else None)
