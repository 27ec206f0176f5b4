r"""What the runner costs: one operators unit through it, against its bare training loop.

Per n, alternately (compilation included, the compilation cache off): `bare`, the whole
run as ONE jitted `vmap(make_train)` over the replicates; `runner`, the same unit
through `runner.train_and_evaluate` into a fresh workdir (chunks, checkpoints,
records). n = 6: Table 1's setting at 200,000 pairs; n = 64: `large` at 20,000.
"""

import tempfile

from absl import flags
import jax
import jax.numpy as jnp

from benchmarks import timing
from lie_unitary.experiments import runner
from lie_unitary.experiments.operators import config as config_lib
from lie_unitary.experiments.operators import experiment

_SIZES = flags.DEFINE_list("sizes", ["6", "64"], "n of the units to time.")
_APPROACH = flags.DEFINE_string("approach", "lie_algebra", "The unit's approach.")
_NUM_TRAIN = flags.DEFINE_integer("num_train", 0, "Pairs per replicate (one epoch); 0: the "
                                  "size's default (above).")


def _variants(n: int):
  """The two ways of training the unit of size n."""
  c = config_lib.get_config("table1" if n <= 6 else "large")
  c.n_values, c.approaches, c.num_epochs = (n,), (_APPROACH.value,), ((0, 1),)
  c.num_train = _NUM_TRAIN.value or (200_000 if n <= 6 else 20_000)
  experiment.validate_config(c)
  unit, = experiment.units(c)
  task, train, _, key = experiment.unit_specs(c, unit.spec)
  reps = jnp.arange(c.num_replicates, dtype=jnp.int32)

  def bare():
    fn = jax.jit(jax.vmap(experiment.make_train(task, train), in_axes=(None, 0)))
    jax.block_until_ready(fn(key, reps))
    return 1

  def through_runner():
    with tempfile.TemporaryDirectory() as workdir:
      runner.train_and_evaluate(experiment, c, workdir, printer=lambda *_: None,
                                handle_signals=False)
    return 1

  steps = c.num_train // c.batch_size
  return {"bare": bare, "runner": through_runner}, f"{c.num_replicates} replicates, {steps:,} steps"


def main(argv):
  del argv
  jax.config.update("jax_enable_compilation_cache", False)
  table = []
  for n in map(int, _SIZES.value):
    variants, unit = _variants(n)
    print(f"n = {n}: {_APPROACH.value}, {unit}", flush=True)
    samples = timing.compare(variants, warmup=False)
    table += timing.rows({"n": n, "unit": f"{_APPROACH.value}, {unit}"}, samples)
  timing.report(table, note="ms per whole unit, compilation included; set --seconds=0 "
                "for one run of each way per round")
