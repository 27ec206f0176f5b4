r"""Time per training step of the principal-branch approaches against plain lie_algebra.

Runs the operator task's training step (vmapped replicates, RMSProp, as the `large`
variant) for each approach on the same data, interleaved round by round so that
every approach sees the same machine load, and prints milliseconds per step and the
ratio to lie_algebra measured in the same run (the refresh every K steps included):

    OPENBLAS_NUM_THREADS=1 python scripts/bench_principal_branch.py --n=64,128

On a 2-core CPU set OPENBLAS_NUM_THREADS=1 before starting (one BLAS thread per
XLA thread; otherwise the timings mostly measure oversubscription).
"""

import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary.experiments.operators import data as ol_data
from lie_unitary.experiments.operators import trainer as ol_trainer

_N = flags.DEFINE_list("n", ["64", "128"], "Matrix sizes.")
_APPROACHES = flags.DEFINE_list(
    "approaches", ["lie_algebra", "lie_zero_init", "lie_recentred", "lie_rebased",
                   "projection"], "Approaches; the first is the reference of the ratios.")
_REPLICATES = flags.DEFINE_integer("replicates", 3, "Replicates vmapped per program.")
_STEPS = flags.DEFINE_integer("steps", 500, "Steps per timed call (a multiple of 100).")
_ROUNDS = flags.DEFINE_integer("rounds", 5, "Timed calls per approach, interleaved.")
_REFRESH_EVERY = flags.DEFINE_integer("refresh_every", 100, "K of the refreshing approaches.")


def _program(n, approach):
  task = ol_data.TaskSpec(n=n, generators=("haar",), num_train=_STEPS.value * 20, num_val=2_000,
                     num_test=2_000, val_subsample=2_000)
  train = ol_trainer.TrainSpec(approach, optimizer="rmsprop", val_every=100,
                       refresh_every=_REFRESH_EVERY.value)
  trainer = ol_trainer.make_trainer(task, train)
  key = jax.random.key(0)
  reps = jnp.arange(_REPLICATES.value)
  state, _ = jax.jit(jax.vmap(lambda r: trainer.init(key, r)))(reps)
  data = jax.jit(jax.vmap(lambda s, r: trainer.epoch_data(key, r, 0, s)))(state, reps)
  epoch = jax.jit(jax.vmap(lambda s, r, d: trainer.chunk(s, d, key, r, 0, 0,
                                                         trainer.intervals_per_epoch)))
  return lambda s, r: epoch(s, r, data), state, reps


def main(argv):
  del argv
  print(f"jax {jax.__version__} on {jax.devices()[0].platform}, {_REPLICATES.value} "
        f"replicates, {_STEPS.value} steps per call, K = {_REFRESH_EVERY.value}")
  for n in (int(v) for v in _N.value):
    programs = {a: _program(n, a) for a in _APPROACHES.value}
    for chunk, state, reps in programs.values():  # compile and warm up
      jax.block_until_ready(chunk(state, reps))
    times = {a: [] for a in programs}
    for _ in range(_ROUNDS.value):
      for a, (chunk, state, reps) in programs.items():
        t0 = time.perf_counter()
        jax.block_until_ready(chunk(state, reps))
        times[a].append((time.perf_counter() - t0) / _STEPS.value * 1e3)
    ref = np.median(times[_APPROACHES.value[0]])
    print(f"\nn = {n}")
    print("| approach | ms per step (median) | ratio to " + _APPROACHES.value[0] + " |")
    print("|---|---|---|")
    for a, t in times.items():
      print(f"| {a} | {np.median(t):.3f} | {np.median(t) / ref:.3f} |")


if __name__ == "__main__":
  app.run(main)
