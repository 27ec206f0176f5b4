"""Test scaffolding written once: launch files by hand, and the launchers as subprocesses."""

import concurrent.futures
import json
import os
import subprocess
import sys

import jax
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write_launch(workdir, number, units, family="operators", config=None, fields=None):
  """Writes WORKDIR/launches/NNNN-<time>.json listing `units` [(name, id), ...], with
  `fields` {id: fields} where given (the number orders the launches, as the runner's
  names do)."""
  folder = os.path.join(str(workdir), "launches")
  os.makedirs(folder, exist_ok=True)
  with open(os.path.join(folder, f"{number:04d}-20250101T00000{number}.json"), "w",
            encoding="utf-8") as f:
    json.dump({"family": family, "config": config or {}, "provenance": {},
               "units": [{"id": uid, "name": name, **({"fields": fields[uid]} if fields
                                                             and uid in fields else {})}
                         for name, uid in units]}, f)


def launcher(family, *args, cwd, timeout=300, env=None):
  """`python -m lie_unitary.experiments.FAMILY ARGS` from `cwd` with this checkout on the
  path, on CPU: the CompletedProcess (text output captured). On one CPU device, as the
  tests' own process, unless ARGS name --cpu_devices (tests/devices_test.py runs the
  default of one device per core)."""
  env = {**os.environ, "PYTHONPATH": ROOT, "OPENBLAS_NUM_THREADS": "1",
         "JAX_PLATFORMS": "cpu", **(env or {})}
  if not any(a.startswith("--cpu_devices") for a in args):
    args = (*args, "--cpu_devices=1")
  return subprocess.run([sys.executable, "-m", f"lie_unitary.experiments.{family}", *args],
                        capture_output=True, text=True, cwd=str(cwd), env=env, timeout=timeout)


def concurrently(*calls):
  """The results of zero-argument `calls`, run at once in threads (in order). Launcher
  subprocesses spend most of their time compiling on one core: two of them at once use
  both of a 2-core machine's."""
  with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
    return [f.result() for f in [pool.submit(c) for c in calls]]


def random_params(init, *args, seed=0):
  """Parameters on the tree that `init(*args)` gives, drawn in numpy (its shapes from
  `jax.eval_shape`: nothing compiles): N(0, 1 / m) for (m, ...) matrices, N(0, 1) else."""
  rng = np.random.default_rng(seed)

  def draw(leaf):
    scale = 1 / np.sqrt(leaf.shape[0]) if leaf.ndim == 2 else 1.0
    return (scale * rng.standard_normal(leaf.shape)).astype(leaf.dtype)

  return jax.tree.map(draw, jax.eval_shape(init, *args))


def image_records(model, accuracies):
  """'val' records of a permuted-Fashion unit, accuracies[replicate][epoch] (epoch 0 on)."""
  fields = dict(unit=f"permuted T=784 {model}-x", unit_name=f"permuted T=784 {model}",
                task="permuted", dataset="fashion_mnist", model=model, hidden_size=170,
                batch_size=128)
  return [dict(fields, kind="val", replicate=rep, step=429 * epoch, epoch=float(epoch),
               val_accuracy=acc - 0.01, test_accuracy=acc, seconds=10.0 * epoch)
          for rep, accs in enumerate(accuracies) for epoch, acc in enumerate(accs)]
