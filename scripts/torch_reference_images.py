r"""A PyTorch expRNN on the sequential-image tasks: the accuracy reference for our orthogonal RNN.

Trains expRNN's architecture in PyTorch (`torch_exprnn.py`: expRNN's model, init and
RMSprop with A at a tenth of the rate; batches of 128) on the SAME data as the experiments: the IDX
files read by `lie_unitary.experiments.rnn.data.load_image_sets`, the same fixed
permutation, the last 5,000 training images held out for validation, 429 updates an
epoch. After every epoch it appends one JSON line per seed to `--out`: the epoch,
validation and test accuracy, and seconds. A rerun continues nothing: it starts over.

PyTorch is NOT a dependency of lie_unitary; run this in a throwaway environment:

  python -m venv /tmp/cmp && /tmp/cmp/bin/pip install torch==2.13.0 -e .
  OPENBLAS_NUM_THREADS=1 /tmp/cmp/bin/python scripts/torch_reference_images.py \
      --dataset=fashion_mnist --task=permuted --epochs=3 --seeds=0,1,2 \
      --out=runs/torch_reference.jsonl
"""

import json
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
_OUT = flags.DEFINE_string("out", "runs/torch_reference.jsonl", "JSON lines written here.")
_BATCH = 128


def main(argv):
  del argv
  import torch  # fails here, with the import error, where it is missing

  torch.set_num_threads(_THREADS.value)
  folder = images.resolve_data_dir(_DATASET.value, _DATA_DIR.value)
  sets = data.load_image_sets(folder, _TASK.value)
  as_inputs = lambda x: torch.from_numpy(x.astype(np.float32) / 255.0).t().unsqueeze(-1)
  n_train = sets.train_x.shape[0]
  per_epoch = n_train // _BATCH

  def accuracy(model, x, y):
    with torch.no_grad():
      hits = sum(int((model(as_inputs(x[i:i + 500])).argmax(-1).numpy() == y[i:i + 500]).sum())
                 for i in range(0, len(y), 500))
    return hits / len(y)

  with open(_OUT.value, "a") as out:
    for seed in _SEEDS.value:
      torch.manual_seed(int(seed))
      rng = np.random.RandomState(int(seed))
      model = torch_exprnn.exprnn(torch, _HIDDEN.value)
      opt = torch_exprnn.optimizer(torch, model)
      start = time.perf_counter()
      for epoch in range(1, _EPOCHS.value + 1):
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
                  "torch": torch.__version__}
        out.write(json.dumps(record) + "\n")
        out.flush()
        print(record, flush=True)


if __name__ == "__main__":
  app.run(main)
