"""Multi-process runs: 2 processes on localhost with jax.distributed (gloo on CPU).

Both families: an operator sweep and an RNN replicate sweep.

Each process runs the same launcher command with its own --process_id; replicates
are sharded over both processes' devices, process 0 writes the records, and the
records equal those of one process.
"""

import socket

import numpy as np
import pytest

from lie_unitary.experiments import workdir as workdir_lib

import helpers

pytestmark = pytest.mark.slow  # processes that start jax and talk over gloo


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def _launch(family, args, workdir, processes):
  """The launcher's output (stdout and stderr) of each of `processes` processes, run at
  once (each waits for the others at the coordinator)."""
  port = _free_port()
  distributed = lambda i: ([f"--coordinator_address=localhost:{port}",
                            f"--num_processes={processes}", f"--process_id={i}"]
                           if processes > 1 else [])
  procs = helpers.concurrently(*(lambda i=i: helpers.launcher(
      family, *args, f"--workdir={workdir}", *distributed(i), cwd=workdir.parent,
      timeout=400) for i in range(processes)))
  for p in procs:
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
  return [p.stdout + p.stderr for p in procs]


def _finals(workdir):
  return {(r["unit_name"], r.get("approach", r.get("model")), r["replicate"]): r
          for r in workdir_lib.read(workdir) if r["kind"] == "final"}


@pytest.mark.parametrize("family,args", [
    ("operators",
     ["--config=operators_smoke", "--config.n_values=(3,)", "--config.approaches=('lie_algebra',)",
      "--config.num_train=1000"]),
    # Replicates shared out, each batch whole (a split batch would be another unit).
    ("rnn",
     ["--config=rnn_smoke", "--config.model=('gurnn',)", "--config.num_replicates=3",
      "--config.num_updates=40", "--config.data_parallel=1"]),
])
def test_two_processes_give_the_records_of_one(family, args, tmp_path):
  one, two = tmp_path / "one", tmp_path / "two"
  _, outs = helpers.concurrently(lambda: _launch(family, args, one, 1),
                                 lambda: _launch(family, args, two, 2))
  assert "2 process(es)" in outs[0] and "2 device(s)" in outs[0]
  single, double = _finals(one), _finals(two)
  assert sorted(single) == sorted(double) and single
  for k, r in double.items():
    np.testing.assert_allclose(r["test_loss"], single[k]["test_loss"], rtol=1e-5)
    np.testing.assert_allclose(r.get("val_loss", 0.0), single[k].get("val_loss", 0.0),
                               rtol=1e-5)
    assert r["unit"] == single[k]["unit"]
