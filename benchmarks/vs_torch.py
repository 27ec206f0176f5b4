r"""Beside PyTorch (not a dependency: `pip install torch geotorch -e .` in a fresh venv).

  torch --compare=layer   forward + backward of orthogonal layers per --shapes (IN x OUT):
                          ours, PyTorch's `parametrizations.orthogonal`, geotorch's
  torch --compare=image   one training step on 128 sequences of 784 pixels: the rnn
                          subject's --models beside the PyTorch expRNN below
  torch --compare=copy    one copy-task training step (--T): the guRNN with modReLU
                          beside PyTorch expRNNs of the same state size
  torch_reference --task=permuted --dataset=fashion_mnist --epochs=10 --seeds=0,1,2
      --out=FILE          trains that expRNN on the experiments' data, a JSON line per
                          seed and epoch (with the CPU's model and the code's commit);
                          checkpoints in FILE.ckpt/ let a rerun continue

docs/benchmarks.md says more.
"""

import importlib
import itertools
import json
import pathlib
import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import rnn
from benchmarks import timing
import lie_unitary as lu
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import images

_COMPARE = flags.DEFINE_enum("compare", "layer", ["layer", "image", "copy"], "What to time.")
_SHAPES = flags.DEFINE_list("shapes", ["256x256", "512x128"], "Layer shapes IN x OUT.")
_LAYER_BATCH = flags.DEFINE_integer("layer_batch", 128, "Batch of the layer comparison.")
_DATASET = flags.DEFINE_string("dataset", "fashion_mnist", "Reference: dataset or IDX folder.")
_DATA_DIR = flags.DEFINE_string("data_dir", "", "Reference: folder of the IDX files.")
_HIDDEN = flags.DEFINE_integer("hidden", 170, "Reference: hidden units (16K budget: 170).")
_EPOCHS = flags.DEFINE_integer("epochs", 3, "Reference: epochs to train.")
_SEEDS = flags.DEFINE_list("seeds", ["0"], "Reference: seeds, one model each, in turn.")
_THREADS = flags.DEFINE_integer("threads", 0, "Reference: torch.set_num_threads; 0: torch's "
                                "default (one per core).")
_UPDATES = flags.DEFINE_integer("updates_per_epoch", 0, "Reference: 0 = every batch (429).")
_LR = flags.DEFINE_float("learning_rate", 1e-3, "Reference: RMSprop's rate (A's a tenth).")
_OUT = flags.DEFINE_string("out", "runs/torch_reference.jsonl", "Reference: JSON lines.")
_BATCH, _T = 128, 784


def _torch():
  try:
    import torch
  except ImportError:
    raise SystemExit("benchmarks torch: PyTorch is not installed here (it is not a "
                     "dependency of lie_unitary): pip install torch") from None
  return torch


def _geotorch():
  try:
    return importlib.import_module("geotorch")
  except ImportError:
    print("geotorch is not installed: no geotorch row")
    return None


def exprnn(torch, hidden: int, num_classes: int = 10, input_size: int = 1,
           every_step: bool = False, geotorch=None):
  """expRNN's architecture as its code runs it: W = matrix_exp(A − Aᵀ) (A's strict upper
  triangle, Cayley init) once a batch, h ← modReLU(h Wᵀ + V x_t), the last state's
  readout (every_step: each state's); with `geotorch`, W = `geotorch.orthogonal` instead
  of `a`. Inputs (T, B, input_size); logits (B, num_classes), or (T, B, num_classes)."""

  class ExpRNN(torch.nn.Module):
    def __init__(self):
      super().__init__()
      if geotorch is None:
        a = torch.zeros(hidden, hidden)
        u = torch.rand(hidden // 2) * (np.pi / 2)
        idx = torch.arange(0, 2 * (hidden // 2), 2)
        a[idx, idx + 1] = -torch.sqrt((1 - torch.cos(u)) / (1 + torch.cos(u)))
        self.a = torch.nn.Parameter(a)
      else:
        self.w = torch.nn.Linear(hidden, hidden, bias=False)
        geotorch.orthogonal(self.w, "weight")
      self.v = torch.nn.Linear(input_size, hidden, bias=False)
      torch.nn.init.kaiming_normal_(self.v.weight, nonlinearity="relu")
      self.b = torch.nn.Parameter(torch.empty(hidden).uniform_(-0.01, 0.01))
      self.readout = torch.nn.Linear(hidden, num_classes)

    def forward(self, x):
      if geotorch is None:
        w = torch.matrix_exp(self.a.triu(1) - self.a.triu(1).t())
      h, states = x.new_zeros(x.shape[1], hidden), []
      # Iterating unbinds x (one gather backward); x[t] would make a (T, B, 1) grad a step.
      with torch.nn.utils.parametrize.cached():  # geotorch's W: once a batch
        for x_t in x:
          z = (h @ w.t() if geotorch is None else self.w(h)) + self.v(x_t)
          h = torch.sign(z) * torch.relu(torch.abs(z) + self.b)
          if every_step:
            states.append(h)
      return self.readout(torch.stack(states) if every_step else h)

  return ExpRNN()


def optimizer(torch, model, learning_rate: float = 1e-3):
  """expRNN's RMSprop: A (or geotorch's W) at a tenth of the rate (its lr_orth)."""
  orth = lambda name: name == "a" or name.startswith("w.")
  params = list(model.named_parameters())
  return torch.optim.RMSprop([
      {"params": [p for n, p in params if not orth(n)], "lr": learning_rate},
      {"params": [p for n, p in params if orth(n)], "lr": learning_rate / 10}])


def _layer_variants(torch, n_in, n_out):
  model = lu.OrthogonalLinear(features=n_out)
  x = jax.random.normal(jax.random.key(0), (_LAYER_BATCH.value, n_in), jnp.float32)
  params = model.init(jax.random.key(1), x)
  vg = jax.jit(jax.value_and_grad(lambda p, x: jnp.sum(model.apply(p, x) ** 2)))
  variants = {"lie_unitary": timing.blocking(vg, params, x)}
  from torch.nn.utils import parametrizations
  tx = torch.randn(_LAYER_BATCH.value, n_in)

  def step(layer):
    def call():
      layer.zero_grad(set_to_none=True)
      layer(tx).pow(2).sum().backward()
      return 1
    return call

  linear = lambda: torch.nn.Linear(n_in, n_out, bias=False)
  variants["torch matrix_exp"] = step(
      parametrizations.orthogonal(linear(), orthogonal_map="matrix_exp"))
  if n_in != n_out:  # square: the default is matrix_exp
    variants["torch default (householder)"] = step(parametrizations.orthogonal(linear()))
  if geotorch := _geotorch():
    geo = linear()
    geotorch.orthogonal(geo, "weight")
    variants["geotorch"] = step(geo)
  return variants


def _training_step(torch, model, x, y):
  """A variant: one RMSprop step of `model` (expRNN's optimizer) on inputs x, labels y."""
  opt = optimizer(torch, model)

  def call():
    opt.zero_grad()
    logits = model(x)
    torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                      y.reshape(-1)).backward()
    opt.step()
    return y.shape[-1]  # sequences: (B,) labels, or (T, B) for the copy task
  return call


def _copy_variant(torch, hidden, T, batch, geotorch=None):
  torch.manual_seed(0)
  model = exprnn(torch, hidden, 9, input_size=10, every_step=True, geotorch=geotorch)
  x, y = data.memory_batch(jax.random.key(0), batch, T)
  x = torch.from_numpy(np.asarray(x).transpose(1, 0, 2).copy())
  y = torch.from_numpy(np.asarray(y).T.astype(np.int64).copy())
  return _training_step(torch, model, x, y)


def _jax_variants(task, n, tokens, T, batch=_BATCH):
  splits, variants, hidden = rnn.use_devices(), {}, {}
  for token, d in itertools.product(tokens, splits):
    label = rnn.variant_label(token, d, splits)
    config, model = rnn.config_for(task, n, batch, token)
    variants[label], spec = rnn.experiment_variant(config, model, T, d)
    hidden[label] = spec.hidden_size
  return variants, hidden


def _copy_variants(torch):
  T, n = int(rnn._T.value[0]), int((rnn._SIZES.value or ["95"])[0])
  batch = int((rnn._BATCH.value or [_BATCH])[0])
  variants, _ = _jax_variants("memory", n, ["gurnn_modrelu"], T, batch)
  variants["torch expRNN"] = _copy_variant(torch, 2 * n, T, batch)
  if geotorch := _geotorch():
    variants["geotorch"] = _copy_variant(torch, 2 * n, T, batch, geotorch)
  return {"task": "copy", "T": T, "B": batch, "hidden": f"{n} complex / {2 * n} real"}, variants


def main(argv):
  del argv
  torch = _torch()
  table = []
  if _COMPARE.value == "layer":
    for shape in _SHAPES.value:
      n_in, n_out = (int(s) for s in shape.lower().split("x"))
      samples = timing.compare(_layer_variants(torch, n_in, n_out))
      table += timing.rows({"shape": f"{n_in} -> {n_out}"}, samples, reference="lie_unitary")
  elif _COMPARE.value == "copy":
    group, variants = _copy_variants(torch)
    samples = timing.compare(variants)
    fastest = min((v for v in variants if not v.startswith("gurnn")),
                  key=lambda v: min(samples[v]))
    table = timing.rows(group, samples, reference=fastest, per="examples")
  else:
    variants, hidden = _jax_variants("permuted", 0, rnn._MODELS.value or rnn_config.IMAGE_MODELS,
                                     _T)
    hidden["torch expRNN"] = rnn_config.BUDGETS[rnn._BUDGET.value]["orthogonal"]
    torch.manual_seed(0)
    x, y = torch.rand(_T, _BATCH, 1), torch.randint(0, 10, (_BATCH,))
    variants["torch expRNN"] = _training_step(torch, exprnn(torch, hidden["torch expRNN"]), x, y)
    table = timing.rows({"budget": rnn._BUDGET.value}, timing.compare(variants),
                        reference="torch expRNN", per="examples")
    for row in table:
      row["hidden"] = hidden[row["variant"]]
  timing.report(table, note=f"torch {torch.__version__} ({torch.get_num_threads()} threads)")


def train_reference(argv):
  """The PyTorch expRNN trained on an image task (see the module docstring)."""
  del argv
  torch = _torch()
  if rnn._TASK.value not in data.IMAGE_TASKS:
    raise app.UsageError(f"--task: one of {data.IMAGE_TASKS}.")
  if _THREADS.value:
    torch.set_num_threads(_THREADS.value)
  sets = data.load_image_sets(images.resolve_data_dir(_DATASET.value, _DATA_DIR.value),
                              rnn._TASK.value)
  as_inputs = lambda x: torch.from_numpy(x.astype(np.float32) / 255.0).t().unsqueeze(-1)
  n_train = sets.train_x.shape[0]
  per_epoch = _UPDATES.value or n_train // _BATCH

  def accuracy(model, x, y):
    with torch.no_grad():
      hits = sum(int((model(as_inputs(x[i:i + 500])).argmax(-1).numpy() == y[i:i + 500]).sum())
                 for i in range(0, len(y), 500))
    return hits / len(y)

  # Where and from which code each epoch ran (a resumed seed may change machine).
  provenance = {"cpu": timing.cpu_model(), "commit": timing.commit()}
  out_path, ckpt_dir = pathlib.Path(_OUT.value), pathlib.Path(_OUT.value + ".ckpt")
  ckpt_dir.mkdir(parents=True, exist_ok=True)
  written = ({(r["seed"], r["epoch"]) for r in map(json.loads, out_path.read_text().splitlines())}
             if out_path.exists() else set())
  for seed in map(int, _SEEDS.value):
    settings = {"seed": seed, "hidden": _HIDDEN.value, "dataset": _DATASET.value,
                "task": rnn._TASK.value, "learning_rate": _LR.value, "batch_size": _BATCH,
                "updates_per_epoch": _UPDATES.value}
    torch.manual_seed(seed)
    rng = np.random.RandomState(seed)
    model = exprnn(torch, _HIDDEN.value)
    opt = optimizer(torch, model, _LR.value)
    done, seconds, ckpt = 0, 0.0, ckpt_dir / f"seed{seed}.pt"
    if ckpt.exists():
      state = torch.load(ckpt, weights_only=False)
      if state["settings"] != settings:
        raise SystemExit(f"{ckpt} was made with {state['settings']}, not {settings}: "
                         "move it away or change --out.")
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
        labels = torch.from_numpy(sets.train_y[idx].astype(np.int64))
        torch.nn.functional.cross_entropy(model(as_inputs(sets.train_x[idx])), labels).backward()
        opt.step()
      record = {"seed": seed, "epoch": epoch, "hidden": _HIDDEN.value, "dataset": _DATASET.value,
                "task": rnn._TASK.value, "val_accuracy": accuracy(model, sets.val_x, sets.val_y),
                "test_accuracy": accuracy(model, sets.test_x, sets.test_y),
                "seconds": round(time.perf_counter() - start, 1), "learning_rate": _LR.value,
                # Absent: a full epoch (the report reads a shorter one as a fraction).
                **({"updates_per_epoch": per_epoch} if _UPDATES.value else {}),
                "torch": torch.__version__, "threads": torch.get_num_threads(),
                **provenance}
      # Checkpoint before the record: a crash between them loses a line, never
      # repeats an epoch on the rerun.
      torch.save({"settings": settings, "epoch": epoch, "seconds": record["seconds"],
                  "model": model.state_dict(), "optimizer": opt.state_dict(),
                  "torch_rng": torch.get_rng_state(), "numpy_rng": rng.get_state()},
                 ckpt.with_suffix(".tmp"))
      ckpt.with_suffix(".tmp").replace(ckpt)
      if (seed, epoch) not in written:
        with open(out_path, "a") as out:
          out.write(json.dumps(record) + "\n")
      print(record, flush=True)
