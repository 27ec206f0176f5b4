r"""Time per epoch of the sequential-image models, timed through the experiments' programs.

For each model (and kernel) at a parameter budget: the unit's jitted training chunk
(`rnn.trainer.make_image_experiment`: batches gathered on the device from the epoch's
order, forward + backward + RMSProp) is compiled, warmed up, and `--updates` updates
are timed (best of `--rounds`); the epoch's time is that rate times its updates
(55,000 // 128 = 429 for MNIST's 60,000 images less 5,000 for validation), plus one
evaluation of the validation and test sets. Prints examples/s too.

  python scripts/bench_image_epoch.py --dataset=fashion_mnist --budget=16k
  python scripts/bench_image_epoch.py --budget=137k --kernels=scan,pallas   # on a GPU

On a GPU the fused kernel ('pallas') applies to the guRNN; the other models scan.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import time  # noqa: E402

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from lie_unitary.experiments import sweep  # noqa: E402
from lie_unitary.experiments.rnn import config as rnn_config  # noqa: E402
from lie_unitary.experiments.rnn import data  # noqa: E402
from lie_unitary.experiments.rnn import experiment as rnn  # noqa: E402
from lie_unitary.experiments.rnn import images  # noqa: E402
from lie_unitary.experiments.rnn import trainer  # noqa: E402

_DATASET = flags.DEFINE_string("dataset", "fashion_mnist", "mnist, fashion_mnist or a folder.")
_DATA_DIR = flags.DEFINE_string("data_dir", "", "Where its IDX files are ('' = the default).")
_TASK = flags.DEFINE_enum("task", "permuted", ["pixel", "permuted"], "The image task.")
_BUDGET = flags.DEFINE_enum("budget", "16k", list(rnn_config.BUDGETS), "Parameter budget.")
_MODELS = flags.DEFINE_list("models", list(rnn_config.IMAGE_MODELS), "Models to time.")
_KERNELS = flags.DEFINE_list("kernels", ["scan"], "scan and/or pallas (the guRNN only).")
_REPLICATES = flags.DEFINE_integer("replicates", 1, "Replicates vmapped per program.")
_UPDATES = flags.DEFINE_integer("updates", 10, "Updates per timed call.")
_ROUNDS = flags.DEFINE_integer("rounds", 2, "Timed calls; the best counts.")


def main(argv):
  del argv
  print(f"jax {jax.__version__}, {jax.default_backend()} ({jax.devices()[0].device_kind})",
        flush=True)
  base = rnn_config.get_config(f"{_TASK.value}_mnist")
  base.dataset, base.data_dir = _DATASET.value, _DATA_DIR.value
  base.param_budget, base.num_replicates = _BUDGET.value, _REPLICATES.value
  folder = images.resolve_data_dir(base.dataset, base.data_dir)
  sets = data.load_image_sets(folder, _TASK.value)
  sets = data.ImageSets(*map(jnp.asarray, sets))
  replicas = sweep.Replicas(_REPLICATES.value)
  lines = ["| model | kernel | hidden | parameters | ms per update | examples/s | epoch (s) "
           "| val + test evaluation (s) |", "|---|---|---|---|---|---|---|---|"]
  for model in _MODELS.value:
    for kernel in _KERNELS.value:
      if kernel != "scan" and model not in trainer.FUSED_MODELS:
        continue
      config = base.copy_and_resolve_references()
      config.model, config.kernel = (model,), kernel
      spec = rnn.unit_spec(config, model, config.T[0])
      exp = trainer.make_image_experiment(spec, replicas.sharding, sets.train_y.shape[0])
      state = exp.init(replicas.ids)
      order = exp.epoch_order(replicas.ids, 0)
      n = _UPDATES.value
      state, out = exp.train_chunk(state, replicas.ids, 0, n, order, sets)  # compile
      jax.block_until_ready(out)
      best = float("inf")
      for r in range(_ROUNDS.value):
        t0 = time.perf_counter()
        state, out = exp.train_chunk(state, replicas.ids, (r + 1) * n, n, order, sets)
        jax.block_until_ready(out)
        best = min(best, (time.perf_counter() - t0) / n)
      jax.block_until_ready(exp.evaluate(state.params, sets.val_x, sets.val_y))  # compile
      t0 = time.perf_counter()
      jax.block_until_ready(exp.evaluate(state.params, sets.val_x, sets.val_y))
      jax.block_until_ready(exp.evaluate(state.params, sets.test_x, sets.test_y))
      evaluation = time.perf_counter() - t0
      count = trainer.num_params(model, spec.hidden_size, 1, 10, spec.get("activation", ""))
      rate = spec.batch_size * _REPLICATES.value / best
      lines.append(f"| {model} | {kernel} | {spec.hidden_size} | {count:,} | {best * 1e3:.1f} "
                   f"| {rate:,.0f} | {best * exp.updates_per_epoch:.1f} | {evaluation:.1f} |")
      print(lines[-1], flush=True)
  print("\n".join(lines))


if __name__ == "__main__":
  app.run(main)
