r"""A PyTorch expRNN on the sequential-image tasks: the accuracy reference for our orthogonal RNN.

Trains expRNN's architecture in PyTorch (`torch_exprnn.py`: expRNN's model, init and
RMSprop with A at a tenth of the rate; batches of 128) on the SAME data as the experiments: the IDX
files read by `lie_unitary.experiments.rnn.data.load_image_sets`, the same fixed
permutation, the last 5,000 training images held out for validation, 429 updates an
epoch. After every epoch it appends one JSON line per seed to `--out`: the epoch,
validation and test accuracy, and seconds; and it saves the seed's model, optimizer and
random states to `<out>.ckpt/seed<seed>.pt`, so a rerun with more `--epochs` continues
each seed where it stopped (a checkpoint made with other settings is refused).

PyTorch is NOT a dependency of lie_unitary; run this in a throwaway environment:

  python -m venv /tmp/cmp && /tmp/cmp/bin/pip install torch==2.13.0 -e .
  OPENBLAS_NUM_THREADS=1 /tmp/cmp/bin/python scripts/torch_reference_images.py \
      --dataset=fashion_mnist --task=permuted --epochs=3 --seeds=0,1,2 \
      --out=runs/torch_reference.jsonl
"""

import json
import pathlib
import time

from absl import app
from absl import flags
import numpy as np
import torch_exprnn  # scripts/, beside this file

from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import images

_DATASET = flags.DEFINE_string("dataset", "fashion_mnist", "Dataset name or IDX folder.")
_DATA_DIR = flags.DEFINE_string("data_dir", "", "Folder of the IDX files ('' to look).")
_TASK = flags.DEFINE_enum("task", "permuted", ["pixel", "permuted"], "Pixel order.")
_HIDDEN = flags.DEFINE_integer("hidden", 170, "Hidden units (expRNN's 16K model: 170).")
_EPOCHS = flags.DEFINE_integer("epochs", 3, "Epochs to train.")
_SEEDS = flags.DEFINE_list("seeds", ["0"], "Seeds, one model each, in turn.")
_THREADS = flags.DEFINE_integer("threads", 1, "torch.set_num_threads.")
_UPDATES = flags.DEFINE_integer("updates_per_epoch", 0,
                                "Updates an epoch: 0 for every batch (429); fewer for a smoke run.")
_LR = flags.DEFINE_float("learning_rate", 1e-3, "RMSprop's rate (A at a tenth of it).")
_OUT = flags.DEFINE_string("out", "runs/torch_reference.jsonl", "JSON lines written here.")
_BATCH = 128


def _settings(seed):
  """What a checkpoint must have been made with to be continued."""
  return {"seed": int(seed), "hidden": _HIDDEN.value, "dataset": _DATASET.value,
          "task": _TASK.value, "learning_rate": _LR.value, "batch_size": _BATCH,
          "updates_per_epoch": _UPDATES.value}


def main(argv):
  del argv
  import torch  # fails here, with the import error, where it is missing

  torch.set_num_threads(_THREADS.value)
  folder = images.resolve_data_dir(_DATASET.value, _DATA_DIR.value)
  sets = data.load_image_sets(folder, _TASK.value)
  as_inputs = lambda x: torch.from_numpy(x.astype(np.float32) / 255.0).t().unsqueeze(-1)
  n_train = sets.train_x.shape[0]
  per_epoch = _UPDATES.value or n_train // _BATCH

  def accuracy(model, x, y):
    with torch.no_grad():
      hits = sum(int((model(as_inputs(x[i:i + 500])).argmax(-1).numpy() == y[i:i + 500]).sum())
                 for i in range(0, len(y), 500))
    return hits / len(y)

  ckpt_dir = pathlib.Path(_OUT.value + ".ckpt")
  ckpt_dir.mkdir(parents=True, exist_ok=True)
  with open(_OUT.value, "a") as out:
    for seed in _SEEDS.value:
      torch.manual_seed(int(seed))
      rng = np.random.RandomState(int(seed))
      model = torch_exprnn.exprnn(torch, _HIDDEN.value)
      opt = torch_exprnn.optimizer(torch, model, _LR.value)
      done, seconds = 0, 0.0
      ckpt = ckpt_dir / f"seed{seed}.pt"
      if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        if state["settings"] != _settings(seed):
          raise SystemExit(f"{ckpt} was made with {state['settings']}, not "
                           f"{_settings(seed)}: move it away or change --out.")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        rng.set_state(state["numpy_rng"])
        done, seconds = state["epoch"], state["seconds"]
        print(f"seed {seed}: continues after epoch {done} ({seconds:.0f} s so far)", flush=True)
      start = time.perf_counter() - seconds
      for epoch in range(done + 1, _EPOCHS.value + 1):
        order = rng.permutation(n_train)
        for b in range(per_epoch):
          idx = order[b * _BATCH:(b + 1) * _BATCH]
          opt.zero_grad()
          loss = torch.nn.functional.cross_entropy(model(as_inputs(sets.train_x[idx])),
                                                   torch.from_numpy(sets.train_y[idx].astype(np.int64)))
          loss.backward()
          opt.step()
        record = {"seed": int(seed), "epoch": epoch, "hidden": _HIDDEN.value,
                  "dataset": _DATASET.value, "task": _TASK.value,
                  "val_accuracy": accuracy(model, sets.val_x, sets.val_y),
                  "test_accuracy": accuracy(model, sets.test_x, sets.test_y),
                  "seconds": round(time.perf_counter() - start, 1),
                  "learning_rate": _LR.value, "torch": torch.__version__}
        # Checkpoint before the record: a crash between them loses a line, never
        # repeats an epoch on the rerun.
        torch.save({"settings": _settings(seed), "epoch": epoch,
                    "seconds": record["seconds"], "model": model.state_dict(),
                    "optimizer": opt.state_dict(), "torch_rng": torch.get_rng_state(),
                    "numpy_rng": rng.get_state()}, ckpt.with_suffix(".tmp"))
        ckpt.with_suffix(".tmp").replace(ckpt)
        out.write(json.dumps(record) + "\n")
        out.flush()
        print(record, flush=True)


if __name__ == "__main__":
  app.run(main)
