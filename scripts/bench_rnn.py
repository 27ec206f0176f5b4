r"""Training throughput (examples/s) of every RNN model, as one table.

One example = one sequence through forward + backward + optimizer step (the same
loss, model and optimizer as training; a fixed batch already on the device), timed
after warm-up, `--steps_per_call` steps per jitted call in a `fori_loop` as training
runs them (so Python's per-call dispatch, ~0.1-0.2 ms, is not counted). All rows of a (task, T) are
compiled first and then timed round-robin (`--rounds`, together `--min_seconds` per
row); each row keeps its best round, so bursts of load from other processes hit all
rows alike rather than distorting one ratio.
Ratios: to the LSTM(30), to the ruRNN of the paper's size for the task (n = 512
adding, 128 memory), and to 'free', the guRNN's recurrence with an unconstrained
2n×2n matrix (the speed limit of this recurrence).

  flock /tmp/lie_unitary_bench.lock env OPENBLAS_NUM_THREADS=1 \
      python scripts/bench_rnn.py            # T = 100 and 1000, adding and memory
  python scripts/bench_rnn.py --quick        # T = 100 only, shorter timings (~1 min)

Runs unchanged on GPU (the backend is whatever jax picks). Timing on a machine shared
with other jobs is noisy: run it under the flock above and report that.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import time  # noqa: E402

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from lie_unitary.experiments import training  # noqa: E402
from lie_unitary.experiments.rnn import config as rnn_configs  # noqa: E402
from lie_unitary.experiments.rnn import data as tasks  # noqa: E402
from lie_unitary.experiments.rnn import experiment as rnn_experiment  # noqa: E402
from lie_unitary.experiments.rnn import trainer as rnn_training  # noqa: E402

_QUICK = flags.DEFINE_bool("quick", False, "T = 100 only and shorter timings.")
_TASKS = flags.DEFINE_list("tasks", ["adding", "memory"], "Tasks to time.")
_TS = flags.DEFINE_list("T", ["100", "1000"], "Sequence lengths (--quick: 100 only).")
_BATCH = flags.DEFINE_integer("batch_size", 20, "Sequences per step.")
_MIN_SECONDS = flags.DEFINE_float("min_seconds", 3.0, "Timing per row, all rounds "
                                   "together (--quick: 1).")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Round-robin timing rounds; the best counts.")
_STEPS = flags.DEFINE_integer("steps_per_call", 10, "Training steps per jitted call (a "
                              "fori_loop, as training runs them; 1 = Python dispatch per step).")

# (row label, model, hidden size).
ROWS = (("guRNN(30)", "gurnn_beta", 30), ("free(30)", "free", 30), ("LSTM(30)", "lstm", 30),
        ("IRNN(30)", "irnn", 30), ("tanh(30)", "tanh", 30), ("ruRNN(128)", "urnn", 128),
        ("ruRNN(512)", "urnn", 512))


def make_timer(task: str, T: int, model: str, hidden_size: int, batch_size: int,
               steps_per_call: int = 10, activation: str = "", kernel: str = "scan"):
  """Compiles and warms up one model's jitted training loop; returns a function
  `seconds -> examples/s` that times it for (at least) that long."""
  config = rnn_configs.get_config(task)
  config.batch_size, config.num_replicates, config.kernel = batch_size, 1, kernel
  config.models[model].hidden_size = hidden_size
  if activation:  # '' = the paper's for the task
    config.models[model].activation = activation
  spec = rnn_experiment.unit_spec(config, model, T)
  exp = rnn_training.make_experiment(spec)
  optimizer = rnn_training.optimizer_for(spec)
  key = jax.random.key(0)
  state = [jax.tree.map(lambda a: a[0], exp.init(jnp.zeros((1,), jnp.int32)))]
  x, targets = tasks.get_task(task).sample(jax.random.fold_in(key, 1), batch_size, T)

  def step(u, carry):
    state, _ = carry
    loss, grads = jax.value_and_grad(exp.loss_fn)(state.params, x, targets,
                                                  jax.random.fold_in(key, u))
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    return training.TrainState(optax.apply_updates(state.params, updates), opt_state), loss

  # `steps_per_call` updates per call inside one jitted loop, as training runs them
  # (chunks of `val_every` in a `fori_loop`): Python's dispatch is not timed.
  steps = jax.jit(lambda state, start: jax.lax.fori_loop(
      start, start + steps_per_call, step, (state, jnp.float32(0))), donate_argnums=0)
  counter = [0]

  def run(num):
    for _ in range(num):
      state[0], loss = steps(state[0], counter[0])
      counter[0] += steps_per_call
    jax.block_until_ready(loss)

  run(2)  # compile and warm up

  def timer(seconds):
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
      run(1)
      calls += 1
    return calls * steps_per_call * batch_size / (time.perf_counter() - start)

  return timer


def examples_per_second(task: str, T: int, model: str, hidden_size: int, batch_size: int,
                        min_seconds: float, rounds: int = 1) -> float:
  """Best of `rounds` timings of min_seconds / rounds each: sequences per second."""
  timer = make_timer(task, T, model, hidden_size, batch_size)
  return max(timer(min_seconds / rounds) for _ in range(rounds))


def main(argv):
  del argv
  quick = _QUICK.value
  min_seconds = 1.0 if quick else _MIN_SECONDS.value
  Ts = [100] if quick else [int(t) for t in _TS.value]
  print(f"backend: {jax.default_backend()} ({jax.devices()[0].device_kind}), "
        f"batch {_BATCH.value}, OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}")
  header = ("| task | T | model | examples/s | × LSTM(30) | × ruRNN (paper's n) | "
            "× free(30) |")
  lines = [header, "|---|---|---|---|---|---|---|"]
  for task in _TASKS.value:
    task = tasks.get_task(task).name
    urnn_label = "ruRNN(512)" if task == "adding" else "ruRNN(128)"
    for T in Ts:
      # Compile every row first, then time them round-robin and keep each row's best
      # round, so that a burst of load from other processes hits all rows alike.
      timers = {label: make_timer(task, T, model, size, _BATCH.value, _STEPS.value)
                for label, model, size in ROWS}
      rate = {label: 0.0 for label in timers}
      for _ in range(_ROUNDS.value):
        for label, timer in timers.items():
          rate[label] = max(rate[label], timer(min_seconds / _ROUNDS.value))
      for label in timers:
        print(f"  {task} T={T} {label}: {rate[label]:,.0f} examples/s", flush=True)
      for label, _, _ in ROWS:
        r = rate[label]
        lines.append(f"| {task} | {T} | {label} | {r:,.0f} | {r / rate['LSTM(30)']:.2f} | "
                     f"{r / rate[urnn_label]:.2f} | {r / rate['free(30)']:.2f} |")
  print("\n".join(lines))


if __name__ == "__main__":
  app.run(main)
