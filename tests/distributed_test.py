"""Multi-process runs: 2 processes on localhost with jax.distributed (gloo on CPU).

Both families: an operator sweep and an RNN replicate sweep.

Each process runs the same launcher command with its own --process_id; replicates
are sharded over both processes' devices, process 0 writes the records, and the
records equal those of one process.
"""

import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from lie_unitary.experiments import workdir as workdir_lib

pytestmark = pytest.mark.slow  # processes that start jax and talk over gloo

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _launch(module, args, workdir, processes):
  env = dict(os.environ, PYTHONPATH=_ROOT, OPENBLAS_NUM_THREADS="1", JAX_PLATFORMS="cpu")
  extra = []
  port = _free_port()
  procs = []
  for i in range(processes):
    if processes > 1:
      extra = [f"--coordinator_address=localhost:{port}", f"--num_processes={processes}",
               f"--process_id={i}"]
    procs.append(subprocess.Popen(
        [sys.executable, "-m", module, *args, f"--workdir={workdir}", *extra], env=env,
        cwd=str(workdir.parent), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  outs = [p.communicate(timeout=400)[0] for p in procs]
  for p, out in zip(procs, outs):
    assert p.returncode == 0, out[-3000:]
  return outs


def _finals(workdir):
  return {(r["unit_name"], r.get("approach", r.get("model")), r["replicate"]): r
          for r in workdir_lib.read_records(workdir / "results.jsonl") if r["kind"] == "final"}


@pytest.mark.parametrize("module,args", [
    ("lie_unitary.experiments.operators",
     ["--config=smoke", "--config.n_values=(3,)", "--config.approaches=('lie_algebra',)",
      "--config.num_train=1000"]),
    ("lie_unitary.experiments.rnn",
     ["--config=smoke", "--config.model=('gurnn',)", "--config.num_replicates=3",
      "--config.num_updates=40"]),
])
def test_two_processes_give_the_records_of_one(module, args, tmp_path):
  one, two = tmp_path / "one", tmp_path / "two"
  _launch(module, args, one, 1)
  outs = _launch(module, args, two, 2)
  assert "2 process(es)" in outs[0] and "2 device(s)" in outs[0]
  single, double = _finals(one), _finals(two)
  assert sorted(single) == sorted(double) and single
  for k, r in double.items():
    np.testing.assert_allclose(r["test_loss"], single[k]["test_loss"], rtol=1e-5)
    np.testing.assert_allclose(r.get("val_loss", 0.0), single[k].get("val_loss", 0.0),
                               rtol=1e-5)
    assert r["unit"] == single[k]["unit"]
