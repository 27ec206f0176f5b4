r"""Training steps of the principal-branch approaches against plain lie_algebra (operators).

Each approach runs the operator task's `large` training (vmapped replicates, RMSProp,
validation every 100 steps, a refresh every --refresh_every) for --steps steps per call;
ms per step, ratios to the first approach.
"""

from absl import flags
import jax
import jax.numpy as jnp

from benchmarks import timing
from lie_unitary.experiments.operators import data as ol_data
from lie_unitary.experiments.operators import experiment

_N = flags.DEFINE_list("n", ["64", "128"], "Matrix sizes.")
_APPROACHES = flags.DEFINE_list(
    "approaches", ["lie_algebra", "lie_zero_init", "lie_recentred", "lie_rebased",
                   "projection"], "Approaches; the first is the reference of the ratios.")
_REPLICATES = flags.DEFINE_integer("replicates", 3, "Replicates vmapped per program.")
_STEPS = flags.DEFINE_integer("steps", 500, "Steps per timed call (a multiple of 100).")
_REFRESH_EVERY = flags.DEFINE_integer("refresh_every", 100, "K of the refreshing approaches.")


def _variant(n, approach):
  """One call of `--steps` training steps of every replicate."""
  task = ol_data.TaskSpec(n=n, generators=("haar",), num_train=_STEPS.value * 20,
                          num_val=2_000, num_test=2_000, val_subsample=2_000)
  train = experiment.TrainSpec(approach, optimizer="rmsprop", val_every=100,
                                 refresh_every=_REFRESH_EVERY.value)
  trainer = experiment.make_trainer(task, train)
  key, reps = jax.random.key(0), jnp.arange(_REPLICATES.value)
  state, _ = jax.jit(jax.vmap(lambda r: trainer.init(r, key)))(reps)
  data = jax.jit(jax.vmap(lambda s, r: trainer.epoch_data(r, s, key, 0)))(state, reps)
  chunk = jax.jit(jax.vmap(lambda s, r, d: trainer.chunk(r, s, d, key, 0, 0,
                                                         trainer.intervals_per_epoch)))
  return timing.blocking(chunk, state, reps, data, items=_STEPS.value)


def main(argv):
  del argv
  table = []
  for n in map(int, _N.value):
    print(f"n = {n}", flush=True)
    samples = timing.compare({a: _variant(n, a) for a in _APPROACHES.value})
    table += timing.rows({"n": n}, samples)
  timing.report(table, note=f"ms per training step, {_REPLICATES.value} replicates, "
                f"K = {_REFRESH_EVERY.value}")
