"""Our orthogonal RNN is the PyTorch expRNN reference (`benchmarks.vs_torch.exprnn`):
from the same parameters, the same loss and gradients in float64. Runs where PyTorch is
installed (it is not a dependency); skips elsewhere."""

import json
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from benchmarks import vs_torch
from lie_unitary import nn as lnn

import idx_files

torch = pytest.importorskip("torch", reason="PyTorch is not installed (optional reference)")


def test_loss_and_gradients_equal_the_pytorch_reference_in_float64():
  n, batch, steps = 12, 5, 40
  torch.manual_seed(0)
  reference = vs_torch.exprnn(torch, n).double()
  with torch.no_grad():  # off the Cayley init's block diagonal: a full A
    reference.a.add_(0.3 * torch.randn(n, n, dtype=torch.float64))
  x = np.random.RandomState(0).rand(batch, steps, 1)
  y = np.arange(batch) % 10
  logits = reference(torch.from_numpy(x).transpose(0, 1))
  torch.nn.functional.cross_entropy(logits, torch.from_numpy(y)).backward()

  r, s = np.triu_indices(n, 1)  # μ_k = A[r, s] over the strict upper triangle
  t = lambda p: p.detach().numpy()
  params = {"cell": {"mu": t(reference.a)[r, s], "v": {"kernel": t(reference.v.weight).T},
                     "modrelu_bias": t(reference.b)},
            "readout": {"kernel": t(reference.readout.weight).T, "bias": t(reference.readout.bias)}}
  with jax.enable_x64(True):
    model = lnn.SequenceModel(lnn.OrthogonalRNNCell(n, param_dtype=jnp.float64), 10)
    loss = lambda p: optax.softmax_cross_entropy_with_integer_labels(
        model.apply({"params": p}, jnp.asarray(x)), jnp.asarray(y)).mean()
    value, grads = jax.value_and_grad(loss)(jax.tree.map(jnp.asarray, params))
    np.testing.assert_allclose(float(value), torch.nn.functional.cross_entropy(
        logits, torch.from_numpy(y)).item(), rtol=1e-12)
    expected = {"cell": {"mu": t(reference.a.grad)[r, s],
                         "v": {"kernel": t(reference.v.weight.grad).T},
                         "modrelu_bias": t(reference.b.grad)},
                "readout": {"kernel": t(reference.readout.weight.grad).T,
                            "bias": t(reference.readout.bias.grad)}}
    jax.tree.map(lambda g, e: np.testing.assert_allclose(np.asarray(g), e, rtol=1e-9, atol=1e-12),
                 grads, expected)


@pytest.mark.slow
def test_reference_training_records_its_machine_and_resumes(tmp_path):
  # The split keeps 5,000 training images for validation: 200 are left to train on.
  data = idx_files.write_image_folder(tmp_path / "data", n_train=5200)
  out = tmp_path / "reference.jsonl"
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

  def train(epochs, hidden=4):
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", "torch_reference", "--task=pixel",
         f"--data_dir={data}", f"--hidden={hidden}", f"--epochs={epochs}", "--seeds=0",
         "--updates_per_epoch=1", "--threads=1", f"--out={out}"],
        cwd=root, capture_output=True, text=True, timeout=300)

  assert train(1).returncode == 0
  first = out.read_text()
  record = json.loads(first)
  assert (record["seed"], record["epoch"], record["hidden"], record["task"]) == (0, 1, 4, "pixel")
  assert record["cpu"] and record["commit"] and record["threads"] == 1
  assert 0 <= record["val_accuracy"] <= 1 and 0 <= record["test_accuracy"] <= 1
  # A rerun continues after epoch 1 and keeps its line; other settings are refused.
  second = train(2)
  assert second.returncode == 0 and "continues after epoch 1" in second.stdout
  lines = out.read_text().splitlines()
  assert lines[0] == first.strip() and [json.loads(x)["epoch"] for x in lines] == [1, 2]
  refused = train(3, hidden=5)
  assert refused.returncode != 0 and "move it away or change --out" in refused.stderr
