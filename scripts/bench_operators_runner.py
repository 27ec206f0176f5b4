r"""What the runner costs: one operators unit through it, against its bare training loop.

For each n, one unit of the operators family (every replicate of one approach) is
timed two ways, alternately, in one process:

  bare     the whole training run as ONE jitted program, `jit(vmap(make_train))`
           over the replicates: init, every epoch, the final test and validation
           losses (what the training loop costs with nothing around it);
  runner   the same unit through `runner.train_and_evaluate` into a fresh workdir:
           chunked jitted calls, progress, checkpoints, records and launch files.

Each timing builds its programs afresh (compilation included in both, as a user pays
it) and the persistent compilation cache is off. The ratio runner / bare of the
medians is what the runner costs.

  python scripts/bench_operators_runner.py                  # n = 6 and 64
  python scripts/bench_operators_runner.py --sizes=6 --rounds=5

n = 6: Table 1's setting (18 replicates, SGD, batches of 20) at 200,000 pairs, i.e.
10,000 steps; n = 64: the `large` setting (3 replicates, RMSProp, Haar targets) at
20,000 pairs, i.e. 1,000 steps.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import tempfile  # noqa: E402
import time  # noqa: E402

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from lie_unitary.experiments import runner  # noqa: E402
from lie_unitary.experiments.operators import config as config_lib  # noqa: E402
from lie_unitary.experiments.operators import experiment  # noqa: E402
from lie_unitary.experiments.operators import trainer as ol_trainer  # noqa: E402

_SIZES = flags.DEFINE_list("sizes", ["6", "64"], "n of the units to time.")
_APPROACH = flags.DEFINE_string("approach", "lie_algebra", "The unit's approach.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Timings of each way, alternated.")
_NUM_TRAIN = flags.DEFINE_integer("num_train", 0, "Pairs per replicate (one epoch); 0: "
                                  "the size's default below.")

# n -> (config variant, pairs per replicate).
_SETTINGS = {3: ("table1", 200_000), 6: ("table1", 200_000), 64: ("large", 20_000)}


def unit_config(n: int):
  """The config of one unit at size n (see the module docstring)."""
  variant, num_train = _SETTINGS.get(n, ("large", 20_000))
  c = config_lib.get_config(variant)
  c.n_values, c.approaches = (n,), (_APPROACH.value,)
  c.num_train = _NUM_TRAIN.value or num_train
  c.num_epochs = ((0, 1),)
  return c


def time_bare(config) -> float:
  """Seconds of the unit's whole training as one jitted, vmapped program."""
  experiment.validate_config(config)
  unit, = experiment.units(config)
  s = unit.spec
  task = experiment.task_spec(config, s.n)
  train = experiment.train_spec(config, s)
  key = experiment._setting_key(config, s.n)
  start = time.perf_counter()
  fn = jax.jit(jax.vmap(ol_trainer.make_train(task, train), in_axes=(None, 0)))
  out = fn(key, jnp.arange(config.num_replicates, dtype=jnp.int32))
  jax.block_until_ready(out)
  return time.perf_counter() - start


def time_runner(config) -> float:
  """Seconds of the same unit through the runner, into a fresh workdir."""
  with tempfile.TemporaryDirectory() as workdir:
    start = time.perf_counter()
    runner.train_and_evaluate(experiment, config, workdir, printer=lambda *_: None,
                              handle_signals=False)
    return time.perf_counter() - start


def main(argv):
  del argv
  jax.config.update("jax_enable_compilation_cache", False)
  print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {jax.device_count()} "
        f"device(s), OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}",
        flush=True)
  lines = ["| n | unit | bare s (median) | runner s (median) | runner / bare |",
           "|---|---|---|---|---|"]
  for n in map(int, _SIZES.value):
    config = unit_config(n)
    times = {"bare": [], "runner": []}
    for r in range(_ROUNDS.value):
      times["bare"].append(time_bare(config))
      times["runner"].append(time_runner(config))
      print(f"n={n} round {r + 1}: bare {times['bare'][-1]:.2f}s, "
            f"runner {times['runner'][-1]:.2f}s", flush=True)
    bare, run = np.median(times["bare"]), np.median(times["runner"])
    steps = config.num_train // config.batch_size
    label = f"{_APPROACH.value}, {config.num_replicates} replicates, {steps:,} steps"
    lines.append(f"| {n} | {label} | {bare:.2f} | {run:.2f} | {run / bare:.3f} |")
  print("\n".join(lines))


if __name__ == "__main__":
  app.run(main)
