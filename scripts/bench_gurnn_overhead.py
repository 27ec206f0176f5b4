r"""Where the guRNN's unitary constraint spends its time in a training step (paper §4).

Times, in one run and round-robin (best of `--rounds`), the training step of:

  free          the guRNN's recurrence with an unconstrained 2n×2n matrix;
  guRNN         the guRNN as trained: U(λ) from one eigh, the spectral VJP;
  no eigh       the guRNN with U replaced by I + 0.01·iA(λ) (not unitary): the same
                block matrix, λ gathers and optimizer, without the eigh or its VJP;
  eigh only     'no eigh' plus one eigh of iA(λ) whose output the step depends on
                (no U = W e^{-iθ} Wᴴ, no spectral VJP): the floor of ANY cell that
                needs one eigh per update, whatever the rest costs.

  guRNN, modReLU the guRNN with modReLU per complex unit (the copy_long cell).

Only the two guRNN rows train the model; the other two are stand-ins for timing. Prints µs per
update and each row's examples/s ratio to 'free'.

  flock /tmp/lie_unitary_bench.lock env OPENBLAS_NUM_THREADS=1 \
      python scripts/bench_gurnn_overhead.py --tasks=adding --T=100 --min_seconds=4
"""

import contextlib
import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench_rnn

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from lie_unitary import algebra  # noqa: E402
from lie_unitary import nn as lnn  # noqa: E402
from lie_unitary.experiments.rnn import trainer as rnn_training  # noqa: E402

import bench_rnn  # noqa: E402

# The flags are bench_rnn's (--tasks, --T: the first of each; --batch_size,
# --min_seconds, --rounds, --steps_per_call).
FLAGS = flags.FLAGS


def _no_eigh(cell):
  n = cell.features
  return jnp.eye(n, dtype=jnp.complex64) + 0.01 * algebra.lambdas_to_hermitian(cell.lam)


def _eigh_only(cell):
  hermitian = algebra.lambdas_to_hermitian(cell.lam)
  theta, _ = jnp.linalg.eigh(jax.lax.stop_gradient(hermitian), symmetrize_input=False)
  return theta[0] * jnp.eye(cell.features, dtype=jnp.complex64) + 0.01 * hermitian


@contextlib.contextmanager
def _unitary_replaced_by(fn):
  """GURNNCell.unitary -> fn while a step is traced (None: unchanged)."""
  original = lnn.GURNNCell.unitary
  if fn is not None:
    lnn.GURNNCell.unitary = fn
  rnn_training.make_experiment.cache_clear()  # the compiled step depends on the patch
  try:
    yield
  finally:
    lnn.GURNNCell.unitary = original
    rnn_training.make_experiment.cache_clear()


# (label, model, stand-in for U, activation ('' = the paper's for the task)).
ROWS = (("free", "free", None, ""), ("guRNN", "gurnn_beta", None, ""),
        ("no eigh", "gurnn_beta", _no_eigh, ""), ("eigh only", "gurnn_beta", _eigh_only, ""),
        ("guRNN, modReLU", "gurnn_beta", None, "modrelu"))


def main(argv):
  del argv
  task, T, batch = FLAGS.tasks[0], int(FLAGS.T[0]), FLAGS.batch_size
  timers = {}
  for label, model, patch, activation in ROWS:
    with _unitary_replaced_by(patch):
      timers[label] = bench_rnn.make_timer(task, T, model, 30, batch, FLAGS.steps_per_call,
                                           activation)
  rate = {label: 0.0 for label in timers}
  for _ in range(FLAGS.rounds):
    for label, timer in timers.items():
      rate[label] = max(rate[label], timer(FLAGS.min_seconds / FLAGS.rounds))
  print(f"{task}, T = {T}, n = 30, batch {batch} ({jax.default_backend()}):")
  print("| step | µs per update | × free (examples/s) |\n|---|---|---|")
  for label in timers:
    print(f"| {label} | {1e6 * batch / rate[label]:,.0f} | {rate[label] / rate['free']:.2f} |")


if __name__ == "__main__":
  app.run(main)
