r"""Sequential-image training throughput: our three models beside a PyTorch expRNN, one process.

Every row is one training step, forward + backward + RMSProp, on a batch of 128
sequences of T = 784 pixels (random images: throughput does not depend on the data):

  guRNN, orthogonal, LSTM   the experiments' own jitted training chunk
                            (`rnn.trainer.make_image_experiment`, `--updates` updates a
                            call), at the parameter budget `--budget`;
  torch expRNN              a PyTorch reference in expRNN's architecture
                            (`torch_exprnn.py`: W = matrix_exp(A − Aᵀ) once per batch,
                            h ← modReLU(h Wᵀ + V x_t) in a Python loop over the 784
                            steps, the last state's readout, RMSprop with A at a tenth
                            of the rate), at the orthogonal RNN's hidden size.

The rows run round-robin (`--rounds`, the best of each counts) so that they share the
machine's state; the table gives examples/s and each row's ratio to the torch row.

PyTorch is NOT a dependency of lie_unitary: run this in a separate environment that
has it beside lie_unitary:

  python -m venv /tmp/cmp && /tmp/cmp/bin/pip install torch==2.13.0 -e .
  OPENBLAS_NUM_THREADS=1 /tmp/cmp/bin/python scripts/bench_image_vs_torch.py
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import time  # noqa: E402

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import torch_exprnn  # noqa: E402  (scripts/, beside this file)

from lie_unitary.experiments import sweep  # noqa: E402
from lie_unitary.experiments.rnn import config as rnn_config  # noqa: E402
from lie_unitary.experiments.rnn import data  # noqa: E402
from lie_unitary.experiments.rnn import experiment as rnn  # noqa: E402
from lie_unitary.experiments.rnn import trainer  # noqa: E402

_BUDGET = flags.DEFINE_enum("budget", "16k", list(rnn_config.BUDGETS), "Parameter budget.")
_MODELS = flags.DEFINE_list("models", list(rnn_config.IMAGE_MODELS), "Our models to time.")
_UPDATES = flags.DEFINE_integer("updates", 3, "Training steps per timed call.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Round-robin rounds; the best counts.")
_DATA_PARALLEL = flags.DEFINE_list(
    "data_parallel", ["1"], "Time each of our models with its batch split over each of these "
    "device counts (config data_parallel), e.g. 1,2.")
_UNROLL = flags.DEFINE_integer("unroll", 0, "> 0: our models' config unroll (time steps per "
                               "iteration of the compiled loop); 0: the config's.")
_REPLICATES = flags.DEFINE_integer("replicates", 1, "Replicates of each of our models, "
                                   "vmapped in one program (examples/s counts them all).")
_SKIP_TORCH = flags.DEFINE_bool("skip_torch", False, "Time our models only (no PyTorch).")
_CPU_DEVICES = flags.DEFINE_integer(
    "cpu_devices", 0, "CPU devices in this process (jax_num_cpu_devices), set before any "
    "work; 0: the largest --data_parallel.")
_BATCH, _T, _IMAGES = 128, 784, 1024


def _sets() -> data.ImageSets:
  rng = np.random.RandomState(0)
  x = lambda n: jnp.asarray(rng.randint(0, 256, (n, _T)).astype(np.uint8))
  y = lambda n: jnp.asarray(rng.randint(0, 10, n).astype(np.int32))
  return data.ImageSets(x(_IMAGES), y(_IMAGES), x(500), y(500), x(500), y(500))


def jax_step(model: str, data_parallel: int = 1):
  """A timer of our `model`'s training (its batch split over `data_parallel` devices):
  () -> seconds per step (one timed call)."""
  config = rnn_config.get_config("permuted_mnist")
  config.param_budget, config.num_replicates = _BUDGET.value, _REPLICATES.value
  config.data_parallel = data_parallel
  if _UNROLL.value:
    config.unroll = _UNROLL.value
  spec = rnn.unit_spec(config, model, _T)
  replicas = sweep.Replicas(_REPLICATES.value, sweep.replicate_sharding(
      jax.devices()[:data_parallel], data_parallel=data_parallel))
  exp = trainer.make_image_experiment(spec, replicas.sharding, _IMAGES)
  everywhere = jax.sharding.NamedSharding(replicas.sharding.mesh, jax.sharding.PartitionSpec())
  sets = jax.device_put(_sets(), everywhere)
  box = {"state": exp.init(replicas.ids), "step": 0}
  order = exp.epoch_order(replicas.ids, 0)

  def run():
    n = _UPDATES.value
    start = box["step"] % (exp.updates_per_epoch - n + 1)
    t0 = time.perf_counter()
    box["state"], out = exp.train_chunk(box["state"], replicas.ids, start, n, order, sets)
    jax.block_until_ready(out)
    box["step"] += n
    return (time.perf_counter() - t0) / (n * _REPLICATES.value)

  run()  # compile, warm up
  return run, spec.hidden_size


def torch_step(hidden: int):
  """A timer of the PyTorch expRNN reference of `hidden` units."""
  import torch  # fail early here, with the import error, where it is missing

  torch.manual_seed(0)
  model = torch_exprnn.exprnn(torch, hidden)
  opt = torch_exprnn.optimizer(torch, model)
  x = torch.rand(_T, _BATCH, 1)
  y = torch.randint(0, 10, (_BATCH,))

  def run():
    t0 = time.perf_counter()
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return time.perf_counter() - t0

  run()
  return run


def main(argv):
  del argv
  splits = [int(d) for d in _DATA_PARALLEL.value]
  jax.config.update("jax_num_cpu_devices", _CPU_DEVICES.value or max(splits))
  versions = f"jax {jax.__version__} ({jax.default_backend()}, {jax.device_count()} devices)"
  if not _SKIP_TORCH.value:
    import torch
    versions += f", torch {torch.__version__} ({torch.get_num_threads()} threads)"
  print(f"{versions}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}", flush=True)
  timers, hidden = {}, {}
  for model in _MODELS.value:
    for d in splits:
      name = model if d == 1 else f"{model} ({d} devices)"
      timers[name], hidden[name] = jax_step(model, d)
  if not _SKIP_TORCH.value:
    reference = rnn_config.BUDGETS[_BUDGET.value]
    timers["torch expRNN"], hidden["torch expRNN"] = torch_step(reference), reference
  # The ratios' reference: the PyTorch row, or our first row without it.
  base = "torch expRNN" if "torch expRNN" in timers else next(iter(timers))
  best = dict.fromkeys(timers, float("inf"))
  for r in range(_ROUNDS.value):
    for name, timer in timers.items():
      best[name] = min(best[name], timer())
    print(f"round {r + 1}: " + ", ".join(f"{k} {_BATCH / v:,.0f}/s" for k, v in best.items()),
          flush=True)
  lines = [f"| model | hidden | examples/s | × {base} |", "|---|---|---|---|"]
  for name, seconds in best.items():
    lines.append(f"| {name} | {hidden[name]} | {_BATCH / seconds:,.0f} | "
                 f"{best[base] / seconds:.2f} |")
  print("\n".join(lines))


if __name__ == "__main__":
  app.run(main)
