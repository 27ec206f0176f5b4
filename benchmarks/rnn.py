r"""RNN training throughput: the experiments' jitted training chunk of each model, in
examples/s (all replicates together; the image tasks read random images).

--models, each `NAME[:HIDDEN]`: gurnn, gurnn_beta, gurnn_tanh, gurnn_relu, gurnn_modrelu
(guRNN₁ with that activation), gurnn_real, gurnn_gauss (its modReLU products as one real
2n × 2n or three n × n; gurnn: the faster measured), free (an unconstrained 2n × 2n
matrix), no_eigh (U(λ) → I + 0.01·iA(λ): all but the eigh), eigh_only (no_eigh plus one
eigh), lstm, irnn, tanh, urnn, orthogonal, matmuls (the recurrence's products alone at
state size 2n, on the devices of the row's layout; needs --sizes). --sizes=n gives
complex-state models n units, real-state ones 2n. GFLOP/s counts the recurrence's
products, 3 a step. docs/benchmarks.md, "RNN throughput".
"""

import contextlib
import itertools
import time
from typing import Any
from typing import NamedTuple

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import timing
from lie_unitary import algebra
from lie_unitary import nn as lnn
from lie_unitary.experiments import launch
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import experiment as rnn_experiment

_TASK = flags.DEFINE_string("task", "memory", "adding, memory (= copy), permuted or pixel.")
_T = flags.DEFINE_list("T", ["100"], "Sequence lengths (the image tasks: 784 always).")
_BATCH = flags.DEFINE_list("batch_size", [], "Sequences per update ([]: the config's).")
_SIZES = flags.DEFINE_list("sizes", [], "n: complex units (see above); []: the config's.")
_MODELS = flags.DEFINE_list("models", [], "Variants (see above); []: the task's usual set.")
_BUDGET = flags.DEFINE_enum("budget", "16k", list(rnn_config.BUDGETS), "Image tasks' budget.")
_DATA_PARALLEL = flags.DEFINE_list("data_parallel", ["0"], "Each variant's batch split over "
                                   "each of these device counts (0: as the launchers).")
_CPU_DEVICES = flags.DEFINE_integer("cpu_devices", 0, "CPU devices (0: one per core).")
_REPLICATES = flags.DEFINE_integer("replicates", 1, "Replicates vmapped in one program.")
_STEPS = flags.DEFINE_integer("steps_per_call", 0, "Updates per jitted call; 0: ~4 s, ≤ 10.")
_MATMUL = flags.DEFINE_integer("matmul_size", 0, "> 0: each row's share of a size² matmul.")

# name -> (the config's model, activation ('' = the config's), whether its state is complex).
_ROWS = {"gurnn": ("gurnn", "", True), "gurnn_beta": ("gurnn_beta", "", True),
         "gurnn_tanh": ("gurnn", "tanh", True), "gurnn_relu": ("gurnn", "relu", True),
         "gurnn_modrelu": ("gurnn", "modrelu", True), "gurnn_real": ("gurnn", "", True),
         "gurnn_gauss": ("gurnn", "", True), "free": ("free", "", True),
         "no_eigh": ("gurnn_beta", "", True), "eigh_only": ("gurnn_beta", "", True),
         "urnn": ("urnn", "", True), "lstm": ("lstm", "", False), "irnn": ("irnn", "", False),
         "tanh": ("tanh", "", False), "orthogonal": ("orthogonal", "", False)}
_IMAGES = 55_000  # training images: 429 updates an epoch at batch 128


def _no_eigh(cell):
  return jnp.eye(cell.features, dtype=jnp.complex64) + 0.01 * algebra.lambdas_to_hermitian(cell.lam)


def _eigh_only(cell):
  hermitian = algebra.lambdas_to_hermitian(cell.lam)
  theta, _ = jnp.linalg.eigh(jax.lax.stop_gradient(hermitian), symmetrize_input=False)
  return theta[0] * jnp.eye(cell.features, dtype=jnp.complex64) + 0.01 * hermitian


@contextlib.contextmanager
def _unitary_replaced_by(fn):
  """GURNNCell.unitary -> fn while a variant is traced (None: unchanged)."""
  original = lnn.GURNNCell.unitary
  lnn.GURNNCell.unitary = fn or original
  rnn_experiment.make_experiment.cache_clear()  # the compiled step depends on the patch
  try:
    yield
  finally:
    lnn.GURNNCell.unitary = original
    rnn_experiment.make_experiment.cache_clear()


def _random_images(T: int, eval_size: int = 500) -> data.ImageSets:
  rng = np.random.RandomState(0)
  x = lambda n: jnp.asarray(rng.randint(0, 256, (n, T)).astype(np.uint8))
  y = lambda n: jnp.asarray(rng.randint(0, 10, n).astype(np.int32))
  return data.ImageSets(x(_IMAGES), y(_IMAGES), x(eval_size), y(eval_size), x(eval_size),
                        y(eval_size))


class UnitPrograms(NamedTuple):
  """One unit's programs as the launcher builds them, its replicas and spec, and random
  image sets on its devices (validation and test one evaluation batch each; None for
  the synthetic tasks)."""
  exp: Any  # rnn.experiment.make_experiment's programs
  replicas: replicas_lib.Replicas
  spec: Any
  sets: data.ImageSets | None


def unit_programs(config, model: str, T: int, data_parallel: int) -> UnitPrograms:
  """The `UnitPrograms` of one unit (not compiled yet)."""
  config.data_parallel = data_parallel  # 0: resolved as the launcher resolves it
  spec = rnn_experiment.make_unit(config, model, T, 0).spec
  d = spec.data_parallel
  replicas = replicas_lib.Replicas(config.num_replicates, replicas_lib.replicate_sharding(
      jax.devices()[:d * config.num_replicates], data_parallel=d))
  images = spec.task in data.IMAGE_TASKS
  source = data.image_source(spec, _IMAGES) if images else data.synthetic_source(spec)
  exp = rnn_experiment.make_experiment(spec, replicas.sharding, source)
  everywhere = jax.sharding.NamedSharding(replicas.sharding.mesh, jax.sharding.PartitionSpec())
  sets = (jax.device_put(_random_images(spec.T, spec.eval_batch_size), everywhere) if images
          else None)
  return UnitPrograms(exp, replicas, spec, sets)


def experiment_variant(config, model: str, T: int, data_parallel: int):
  """The experiments' training chunk of one unit as a variant (compiled and warmed up),
  and its spec."""
  exp, replicas, spec, sets = unit_programs(config, model, T, data_parallel)
  epoch_data, per_epoch = exp.epoch_data(replicas.ids, 0), exp.source.updates_per_epoch
  # The updates of a call stay within the epoch.
  chunk = lambda s, u, num: exp.train_chunk(
      s, replicas.ids, u % (per_epoch - num + 1) if per_epoch else u, num, epoch_data, sets)
  box = {"state": exp.init(replicas.ids), "update": 0, "steps": _STEPS.value or 1}

  def call():
    box["state"], out = chunk(box["state"], box["update"], box["steps"])
    jax.block_until_ready(out)
    box["update"] += box["steps"]
    return box["steps"] * spec.batch_size * config.num_replicates

  call()  # compiles
  if not _STEPS.value:
    t0 = time.perf_counter()
    call()
    # A call's own costs (allocating its (T, B, H) buffers) spread over its updates.
    box["steps"] = int(np.clip(4.0 / (time.perf_counter() - t0), 1, 10))
  return call, spec


def mesh(d: int) -> jax.sharding.Mesh:
  """The first d devices along one axis, "data"."""
  return jax.sharding.Mesh(np.array(jax.devices()[:d]), ("data",))


def chain_inputs(H: int, G: int, batch: int, length: int):
  """The chain's W (H, G·H) and its forward and reverse inputs p, g (length, batch, H)."""
  k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
  # Orthogonal H × H blocks scaled by 1/G: h stays bounded whatever G.
  w = jnp.concatenate([jnp.linalg.qr(jax.random.normal(k, (H, H)))[0] / G
                       for k in jax.random.split(k1, G)], axis=1)
  p, g = (0.01 * jax.random.normal(k, (length, batch, H), jnp.float32) for k in (k2, k3))
  return w, p, g


def chain_program(H: int, G: int, d: int, train: bool, unroll: int = 1):
  """The recurrence's products alone on d devices, each its share of the batch: a scan
  h ← fold(h W) + p with W (H, G·H), a reverse scan δ ← tile(δ) Wᵀ + g and one
  W̄ = Σ hᵀ tile(δ), nothing else. Jitted (w, p, g) -> W̄ (H, G·H) in training, else a
  scalar of the last states (evaluation reads no other)."""
  P = jax.sharding.PartitionSpec
  fold = lambda y: y if G == 1 else y.reshape(y.shape[0], G, H).sum(axis=1)
  tile = lambda y: y if G == 1 else jnp.tile(y, (1, G))

  def local(w, p, g):
    if not train:  # the last state only: evaluation reads no other
      last, _ = jax.lax.scan(lambda h, pt: (fold(h @ w) + pt, None), jnp.zeros_like(p[0]), p,
                             unroll=unroll)
      return jax.lax.psum(last.sum(), "data")
    _, hs = jax.lax.scan(lambda h, pt: (fold(h @ w) + pt,) * 2, jnp.zeros_like(p[0]), p,
                         unroll=unroll)
    _, ds = jax.lax.scan(lambda e, gt: (tile(e) @ w.T + gt,) * 2, jnp.zeros_like(g[0]), g,
                         reverse=True, unroll=unroll)
    w_bar = hs.reshape(-1, H).T @ tile(ds.reshape(-1, H))
    return jax.lax.psum(w_bar, "data")

  return jax.jit(jax.shard_map(local, mesh=mesh(d), in_specs=(P(), P(None, "data"),
                                                               P(None, "data")), out_specs=P()))


def chain_variant(H: int, G: int, batch: int, length: int, d: int, train: bool,
                  unroll: int = 1):
  """`chain_program` on `chain_inputs` as a variant counting examples."""
  P = jax.sharding.PartitionSpec
  w, p, g = chain_inputs(H, G, batch, length)
  put = lambda a, spec: jax.device_put(a, jax.sharding.NamedSharding(mesh(d), spec))
  return timing.blocking(chain_program(H, G, d, train, unroll), put(w, P()),
                         put(p, P(None, "data")), put(g, P(None, "data")), items=batch)


def config_for(task: str, n: int, batch: int, token: str):
  """The unit's config and model for variant `token` (see the module docstring)."""
  name, _, hidden = token.partition(":")
  config = rnn_config.get_config(f"{task}_mnist" if task in data.IMAGE_TASKS
                                 else data.get_task(task).name)
  config.num_replicates = _REPLICATES.value
  if task in data.IMAGE_TASKS:  # an explicit size replaces the budget's
    config.param_budget = "" if hidden or n else _BUDGET.value
  if batch:
    config.batch_size = batch
  if name == "matmuls":
    return config, None
  model, activation, complex_state = _ROWS[name]
  if name in ("gurnn_real", "gurnn_gauss"):
    config.complex_product = name.partition("_")[2]
  if activation:
    config.models[model].activation = activation
  if hidden or n:
    config.models[model].hidden_size = int(hidden) if hidden else n * (1 if complex_state else 2)
  return config, model


def use_devices() -> list[int]:
  """Sets the CPU device count (--cpu_devices) before jax starts; the --data_parallel values."""
  splits = [int(d) for d in _DATA_PARALLEL.value]
  count = _CPU_DEVICES.value or launch.cpu_cores()
  if count < max(splits):
    raise app.UsageError(f"--data_parallel={max(splits)} needs as many devices; "
                         f"--cpu_devices={count}.")
  jax.config.update("jax_num_cpu_devices", count)
  return splits


def variant_label(token: str, d: int, splits: list[int]) -> str:
  """A row's name: the variant, and its devices when --data_parallel has several values."""
  if len(splits) == 1:
    return token
  return f"{token} ({'default' if d == 0 else f'{d} device' + 's' * (d > 1)})"


def flops_per_example(G: int, H: int, length: int, train: bool) -> float:
  """The recurrent products' FLOPs per example: 2 G H² a step (state H in reals, G gates),
  three times in training (forward, δ chain, W̄)."""
  return (3 if train else 1) * 2.0 * G * H * H * length


def _flops(token, spec, length) -> float | None:
  """FLOPs per example of the recurrence's training products; None for the ruRNN."""
  name = token.partition(":")[0]
  if name == "urnn":
    return None
  H = spec.hidden_size * (2 if _ROWS[name][2] else 1)
  return flops_per_example(4 if name == "lstm" else 1, H, length, train=True)


def main(argv):
  del argv
  splits = use_devices()
  images = _TASK.value in data.IMAGE_TASKS
  tokens = _MODELS.value or (list(rnn_config.IMAGE_MODELS) if images else
                             ["gurnn_beta", "free", "lstm", "irnn", "tanh"])
  unknown = {t.partition(":")[0] for t in tokens} - set(_ROWS) - {"matmuls"}
  if unknown or ("matmuls" in tokens and not _SIZES.value):
    raise app.UsageError(f"--models: unknown {sorted(unknown)} (choose from {sorted(_ROWS)}, "
                         "matmuls), or 'matmuls' without --sizes.")
  limit = None
  if size := _MATMUL.value:  # GFLOP/s of one (size, size) float32 matmul
    a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
    samples = timing.compare({"matmul": timing.blocking(jax.jit(lambda a: a @ a), a)})
    limit = 2.0 * size**3 / min(samples["matmul"]) / 1e9
  table = []
  for T, n, batch in itertools.product([784] if images else map(int, _T.value),
                                       map(int, _SIZES.value or [0]),
                                       map(int, _BATCH.value or [0])):
    variants, flops, specs = {}, {}, {}
    for token, d in itertools.product(tokens, splits):
      label = variant_label(token, d, splits)
      config, model = config_for(_TASK.value, n, batch, token)
      length = data.get_task(config.task).length(T)
      if model is None:  # on the devices the experiment rows of this layout use
        config.data_parallel = d
        variants[label] = chain_variant(2 * n, 1, config.batch_size, length,
                                        rnn_experiment.data_parallel(config), train=True)
        flops[label] = flops_per_example(1, 2 * n, length, train=True)
        continue
      with _unitary_replaced_by({"no_eigh": _no_eigh, "eigh_only": _eigh_only}.get(token)):
        variants[label], specs[label] = experiment_variant(config, model, T, d)
      flops[label] = _flops(token, specs[label], length)
    group = {"task": _TASK.value, "T": T, "n": n or "config", "B": batch or "config"}
    print(group, flush=True)
    rows = timing.rows(group, timing.compare(variants), per="examples")
    for row in rows:
      label, spec = row["variant"], specs.get(row["variant"])
      row["hidden"] = spec.hidden_size if spec else 2 * n
      if flops[label]:
        row["GFLOP/s"] = row["examples/s"] * flops[label] / 1e9
        if limit:
          row["÷ matmul limit"] = row["GFLOP/s"] / limit
      if images and spec:
        row["epoch_s"] = 429 * spec.batch_size * _REPLICATES.value / row["examples/s"]
    table += rows
  timing.report(table, note="ms per example (all replicates)" + (
      f"; matmul limit ({_MATMUL.value}² float32) {limit:.1f} GFLOP/s" if limit else ""),
      matmul_limit_gflops=limit)
