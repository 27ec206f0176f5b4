r"""RNN training throughput at the sizes people train, against the machine's own limits.

For every (n, batch B, T) and model, one training step (forward + backward + RMSProp
update, the copy task's loss and readout, a fixed batch on the device) is compiled,
warmed up and timed round-robin with the other rows of that size (best of
`--rounds`). Each row prints examples/s and the achieved GFLOP/s of its recurrence
(the matmuls that scale with B·T, counted as 3 products per step: forward, the
reverse pass's δ Wᵀ and its share of W̄):

  guRNN(tanh), guRNN(relu)   GURNNCell, elementwise activation, state 2n reals;
  guRNN(modReLU)             the copy_long cell (modReLU per complex unit);
  free(tanh)                 the same recurrence with an unconstrained 2n×2n matrix;
  LSTM(2n)                   flax's LSTM with 2n hidden units (the same state size;
                             its recurrent matmul is 2n × 8n, four times the FLOPs).

and two references measured in the same run, so that the ratios mean the same thing
on any machine:

  matmul limit               one large f32 matmul (`--matmul_size`², best of a few):
                             what the machine's BLAS path reaches at all;
  matmuls alone              the recurrence's own products and nothing else: a scan
                             of h ← h W + p, a reverse scan of δ ← δ Wᵀ + g and one
                             W̄ = Σ hᵀδ, at the row's (B, 2n, T).

Ratios: each row's GFLOP/s over the matmul limit and over the matmuls alone.

  flock /tmp/lie_unitary_bench.lock env OPENBLAS_NUM_THREADS=1 \
      python scripts/bench_rnn_throughput.py                       # n 64/95/128, B 128, T 1000
  python scripts/bench_rnn_throughput.py --sizes=30 --batches=20 --lengths=100  # the paper's size
  python scripts/bench_rnn_throughput.py --sizes=64,95,128,256 --batches=20,128 \
      --lengths=100,1000
  python scripts/bench_rnn_throughput.py --kernels=scan,pallas --batches=128,1024  # GPU

Runs unchanged on GPU/TPU (the backend is whatever jax picks). Timing on a machine
shared with other jobs is noisy: run it under the flock above and report that.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys  # noqa: E402
import time  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_rnn

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lie_unitary.experiments import sweep  # noqa: E402
from lie_unitary.experiments.rnn import config as rnn_configs  # noqa: E402
from lie_unitary.experiments.rnn import data as tasks  # noqa: E402
from lie_unitary.experiments.rnn import experiment as rnn_experiment  # noqa: E402
from lie_unitary.experiments.rnn import trainer as rnn_training  # noqa: E402

import bench_rnn  # noqa: E402

_N = flags.DEFINE_list("sizes", ["64", "95", "128"], "n: complex units (state 2n reals).")
_BATCH = flags.DEFINE_list("batches", ["128"], "Sequences per step.")
_T = flags.DEFINE_list("lengths", ["1000"],
                       "T: the copy task's blank stretch (sequences of T + 20).")
_MODELS = flags.DEFINE_list("models", ["gurnn_tanh", "gurnn_relu", "gurnn_modrelu", "free",
                                       "lstm"], "Rows to time (see the module docstring).")
_KERNELS = flags.DEFINE_list("kernels", ["scan"], "How the guRNN and free cells run their "
                             "loops: scan (lax.scan) and/or pallas (fused kernels, for GPUs; "
                             "interpreted, slowly, on CPU). LSTM always scans.")
_PRECISION = flags.DEFINE_enum(
    "precision", None, ["default", "high", "highest"], "jax's default matmul precision for "
    "every row and reference. On GPU/TPU float32 'default' is TF32 / bfloat16 passes, while "
    "the fused kernels always multiply in full float32: pass highest to compare them. "
    "Unset: jax's own default.")
# --min_seconds (per row, all rounds together; at least one step per round) and
# --rounds (round-robin; the best counts) are bench_rnn's flags.
FLAGS = flags.FLAGS
_MATMUL = flags.DEFINE_integer("matmul_size", 2048, "Size of the reference matmul.")
_DATA_PARALLEL = flags.DEFINE_integer(
    "data_parallel", 1, "d > 1: also time each row's training as the experiments run it "
    "(`train_chunk`, data sampled in the loop) on one device and with its batch split over "
    "d devices (config data_parallel). On one CPU process, --cpu_devices makes d devices.")
_CPU_DEVICES = flags.DEFINE_integer("cpu_devices", 0, "> 0: this many CPU devices in this "
                                    "process (jax_num_cpu_devices), set before any work.")
_COORDINATOR = flags.DEFINE_string("coordinator_address", "", "host:port of process 0 for a "
                                   "multi-process run (jax.distributed, gloo on CPU).")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", 1, "With --coordinator_address.")
_PROCESS_ID = flags.DEFINE_integer("process_id", 0, "With --coordinator_address.")

# name -> (row label, rnn config model, activation override, state-size multiplier of n).
_ROWS = {
    "gurnn_tanh": ("guRNN(tanh)", "gurnn", "tanh"),
    "gurnn_relu": ("guRNN(relu)", "gurnn", "relu"),
    "gurnn_modrelu": ("guRNN(modReLU)", "gurnn", "modrelu"),
    "free": ("free(tanh)", "free", "tanh"),
    "lstm": ("LSTM(2n)", "lstm", ""),
}


def recurrence_flops(model: str, n: int, batch: int, T: int, length: int) -> float:
  """FLOPs of the recurrent products of one training step: 3 per step (see above)."""
  del T
  H = 2 * n
  width = 4 * H if model == "lstm" else H  # LSTM(2n): h (B, 2n) @ (2n, 8n)
  return 3 * 2 * batch * H * width * length


def best_rate(fn, args, flops: float, seconds: float = 1.0, repeats: int = 3) -> float:
  """Best GFLOP/s of `fn(*args)` over `repeats` timings of ≥ `seconds`/`repeats` each."""
  jax.block_until_ready(fn(*args))
  best = 0.0
  for _ in range(repeats):
    calls, start = 0, time.perf_counter()
    while calls == 0 or time.perf_counter() - start < seconds / repeats:
      jax.block_until_ready(fn(*args))
      calls += 1
    best = max(best, calls * flops / (time.perf_counter() - start) / 1e9)
  return best


def matmul_limit(size: int) -> float:
  """GFLOP/s of one (size, size) @ (size, size) float32 matmul, best of a few."""
  a = jax.random.normal(jax.random.key(0), (size, size), jnp.float32)
  return best_rate(jax.jit(lambda a: a @ a), (a,), 2.0 * size**3, seconds=2.0)


def matmuls_alone(H: int, batch: int, length: int) -> float:
  """GFLOP/s of the recurrence's products alone at state size H (see the docstring)."""
  k1, k2, k3 = jax.random.split(jax.random.key(1), 3)
  w = jnp.linalg.qr(jax.random.normal(k1, (H, H), jnp.float32))[0]  # keeps h bounded
  p = jax.random.normal(k2, (length, batch, H), jnp.float32) * 0.01
  g = jax.random.normal(k3, (length, batch, H), jnp.float32) * 0.01

  @jax.jit
  def products(w, p, g):
    _, hs = jax.lax.scan(lambda h, pt: (h @ w + pt,) * 2, jnp.zeros_like(p[0]), p)
    _, ds = jax.lax.scan(lambda d, gt: (d @ w.T + gt,) * 2, jnp.zeros_like(g[0]), g,
                         reverse=True)
    return hs.reshape(-1, H).T @ ds.reshape(-1, H)

  return best_rate(products, (w, p, g), 3 * 2.0 * batch * H * H * length, seconds=2.0)


def train_chunk_timer(n: int, batch: int, T: int, model: str, activation: str,
                      data_parallel: int, steps: int = 2):
  """Compiles and warms up the experiments' own training chunk (one replicate, `steps`
  updates per call, data sampled inside) with the batch split over `data_parallel`
  devices; returns `seconds -> examples/s` (at least one call)."""
  config = rnn_configs.get_config("memory")
  config.batch_size, config.num_replicates, config.data_parallel = batch, 1, data_parallel
  config.models[model].hidden_size = 2 * n if model == "lstm" else n
  if activation:
    config.models[model].activation = activation
  spec = rnn_experiment.unit_spec(config, model, T)
  devices = jax.devices()[:data_parallel]
  sharding = sweep.replicate_sharding(devices, data_parallel=data_parallel)
  exp = rnn_training.make_experiment(spec, sharding)
  ids = jax.make_array_from_callback((1,), sharding, lambda i: np.zeros(1, np.int32)[i])
  box = [exp.init(ids), 0]

  def call():
    box[0], loss = exp.train_chunk(box[0], ids, box[1], steps)
    box[1] += steps
    jax.block_until_ready(loss)

  call()  # compile, warm up

  def timer(seconds):
    calls, start = 0, time.perf_counter()
    while calls == 0 or time.perf_counter() - start < seconds:
      call()
      calls += 1
    return calls * steps * batch / (time.perf_counter() - start)

  return timer


def main(argv):
  del argv
  if _PRECISION.value:
    with jax.default_matmul_precision(_PRECISION.value):
      return _main()
  return _main()


def _main():
  if _COORDINATOR.value:
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value)
  elif _CPU_DEVICES.value:
    jax.config.update("jax_num_cpu_devices", _CPU_DEVICES.value)
  if _DATA_PARALLEL.value > 1:
    return data_parallel_main()
  print(f"matmul precision: {_PRECISION.value or 'jax default'}")
  print(f"backend: {jax.default_backend()} ({jax.devices()[0].device_kind}), "
        f"{jax.device_count()} device(s), OPENBLAS_NUM_THREADS="
        f"{os.environ.get('OPENBLAS_NUM_THREADS')}, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}",
        flush=True)
  unknown = sorted(set(_MODELS.value) - set(_ROWS))
  if unknown:
    raise app.UsageError(f"unknown --models {unknown}; choose from {sorted(_ROWS)}.")
  if set(_KERNELS.value) - {"scan", "pallas"}:
    raise app.UsageError(f"--kernels: choose from scan, pallas; got {_KERNELS.value}.")
  limit = matmul_limit(_MATMUL.value)
  print(f"matmul limit ({_MATMUL.value}² f32): {limit:.1f} GFLOP/s", flush=True)
  lines = ["| n | B | T | model | examples/s | GFLOP/s | × matmul limit | × matmuls alone |",
           "|---|---|---|---|---|---|---|---|"]
  for n in map(int, _N.value):
    for batch in map(int, _BATCH.value):
      for T in map(int, _T.value):
        length = tasks.get_task("memory").length(T)
        alone = matmuls_alone(2 * n, batch, length)
        print(f"n={n} B={batch} T={T}: matmuls alone {alone:.1f} GFLOP/s", flush=True)
        timers, rows = {}, {}
        for name in _MODELS.value:
          label, model, activation = _ROWS[name]
          size = 2 * n if model == "lstm" else n
          # Small steps run several per jitted call (as training does), so that
          # Python's dispatch (~0.1-0.2 ms) is not what is timed.
          flops = recurrence_flops(model, n, batch, T, length)
          steps = int(max(1, min(10, 5e8 // flops)))
          for kernel in (("scan",) if model == "lstm" else _KERNELS.value):
            row = name if kernel == "scan" else f"{name} [{kernel}]"
            rows[row] = (label if kernel == "scan" else f"{label} [{kernel}]", model)
            timers[row] = bench_rnn.make_timer("memory", T, model, size, batch,
                                               steps_per_call=steps, activation=activation,
                                               kernel=kernel)
        rate = dict.fromkeys(timers, 0.0)
        for _ in range(FLAGS.rounds):
          for name, timer in timers.items():
            rate[name] = max(rate[name], timer(FLAGS.min_seconds / FLAGS.rounds))
        lines.append(f"| {n} | {batch} | {T} | matmuls alone | – | {alone:.1f} | "
                     f"{alone / limit:.2f} | 1.00 |")
        for name in timers:
          label, model = rows[name]
          gflops = rate[name] / batch * recurrence_flops(model, n, batch, T, length) / 1e9
          print(f"  {label}: {rate[name]:,.1f} examples/s, {gflops:.1f} GFLOP/s", flush=True)
          # LSTM's products are 2n × 8n: compare it with the limit only.
          vs_alone = "–" if model == "lstm" else f"{gflops / alone:.2f}"
          lines.append(f"| {n} | {batch} | {T} | {label} | {rate[name]:,.1f} | {gflops:.1f} | "
                       f"{gflops / limit:.2f} | {vs_alone} |")
  print(f"\nmatmul limit: {limit:.1f} GFLOP/s ({jax.default_backend()})")
  print("\n".join(lines))


def data_parallel_main():
  """Rows: each model's training chunk on one device and split over d devices."""
  d = _DATA_PARALLEL.value
  if jax.device_count() < d:
    raise app.UsageError(f"--data_parallel={d} needs {d} devices; jax sees "
                         f"{jax.device_count()} (--cpu_devices or --num_processes).")
  lead = jax.process_index() == 0
  say = print if lead else (lambda *a, **k: None)
  say(f"backend: {jax.default_backend()}, {jax.device_count()} device(s) in "
      f"{jax.process_count()} process(es), OPENBLAS_NUM_THREADS="
      f"{os.environ.get('OPENBLAS_NUM_THREADS')}", flush=True)
  limit = matmul_limit(_MATMUL.value)
  say(f"matmul limit ({_MATMUL.value}² f32, one device): {limit:.1f} GFLOP/s", flush=True)
  lines = ["| n | B | T | model | 1 device: examples/s | "
           f"{d} devices: examples/s | speed-up | {d} devices: GFLOP/s | × matmul limit |",
           "|---|---|---|---|---|---|---|---|---|"]
  for n in map(int, _N.value):
    for batch in map(int, _BATCH.value):
      for T in map(int, _T.value):
        for name in _MODELS.value:
          label, model, activation = _ROWS[name]
          # One device and d devices compiled first, then timed round-robin (best round).
          timers = [train_chunk_timer(n, batch, T, model, activation, k)
                    for k in ((1, d) if jax.process_count() == 1 else (d,))]
          rates = [0.0] * len(timers)
          for _ in range(FLAGS.rounds):
            for i, timer in enumerate(timers):
              rates[i] = max(rates[i], timer(FLAGS.min_seconds / FLAGS.rounds))
          one, many = (rates if len(rates) == 2 else (float("nan"), rates[0]))
          gflops = many / batch * recurrence_flops(
              model, n, batch, T, tasks.get_task("memory").length(T)) / 1e9
          say(f"n={n} B={batch} T={T} {label}: {one:,.1f} → {many:,.1f} examples/s", flush=True)
          lines.append(f"| {n} | {batch} | {T} | {label} | {one:,.1f} | {many:,.1f} | "
                       f"{many / one:.2f} | {gflops:.1f} | {gflops / limit:.2f} |")
  say("\n".join(lines))


if __name__ == "__main__":
  app.run(main)
