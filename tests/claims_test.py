"""One unit, one trainer: claims in the workdir, taken atomically, released, taken over."""

import json
import os
import socket
import subprocess
import sys
import time

import pytest

from lie_unitary.experiments import workdir as workdir_lib

import helpers


def test_a_claim_is_exclusive_and_released(tmp_path):
  with workdir_lib.claim(str(tmp_path), "u") as first:
    assert first is None  # this process's
    with workdir_lib.claim(str(tmp_path), "u") as second:
      assert second == f"process {os.getpid()} on {socket.gethostname()}"
    with workdir_lib.claim(str(tmp_path), "v") as other:
      assert other is None  # another unit
  with workdir_lib.claim(str(tmp_path), "u") as again:
    assert again is None
  assert os.listdir(tmp_path / "claims") == [".lock"]


def _leave_claim(tmp_path, owner, age=0.0):
  folder = tmp_path / "claims"
  folder.mkdir(exist_ok=True)
  file = folder / "u"
  file.write_text(json.dumps(owner))
  then = time.time() - age
  os.utime(file, (then, then))


def test_a_claim_of_a_dead_process_on_this_host_is_taken_over_at_once(tmp_path):
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True)
  _leave_claim(tmp_path, {"host": socket.gethostname(), "pid": int(dead.stdout)})
  with workdir_lib.claim(str(tmp_path), "u") as holder:
    assert holder is None


def test_a_claim_without_heartbeat_is_taken_over_only_when_stale(tmp_path):
  owner = {"host": "another-host", "pid": 1}
  _leave_claim(tmp_path, owner, age=workdir_lib.STALE_SECONDS / 2)
  with workdir_lib.claim(str(tmp_path), "u") as holder:
    assert holder == "process 1 on another-host"  # it may be alive there
  _leave_claim(tmp_path, owner, age=workdir_lib.STALE_SECONDS + 5)
  with workdir_lib.claim(str(tmp_path), "u") as holder:
    assert holder is None


def test_a_claim_file_left_empty_or_cut_is_taken_over_once_stale(tmp_path):
  """A process killed while writing its claim leaves it unreadable: live while fresh (it may
  be being written), a dead owner's once STALE_SECONDS old."""
  for text in ("", '{"host": "h'):
    _leave_claim(tmp_path, {})
    (tmp_path / "claims" / "u").write_text(text)
    with workdir_lib.claim(str(tmp_path), "u") as holder:
      assert holder == "another process"
    then = time.time() - workdir_lib.STALE_SECONDS - 5
    os.utime(tmp_path / "claims" / "u", (then, then))
    with workdir_lib.claim(str(tmp_path), "u") as holder:
      assert holder is None
    _leave_claim(tmp_path, {"host": "another-host", "pid": 1})  # ours was released


def test_the_heartbeat_keeps_a_held_claim_fresh(tmp_path, monkeypatch):
  monkeypatch.setattr(workdir_lib, "HEARTBEAT_SECONDS", 0.05)
  with workdir_lib.claim(str(tmp_path), "u"):
    file = tmp_path / "claims" / "u"
    os.utime(file, (0, 0))
    time.sleep(0.3)
    assert time.time() - os.stat(file).st_mtime < 5


@pytest.mark.slow
def test_two_launches_on_one_workdir_share_its_seeded_units(tmp_path):
  """Two launcher processes at once (one per core): every unit, each seed's, is trained
  by one of them; both exit 0 and the report holds every seed."""
  env = {**os.environ, "PYTHONPATH": helpers.ROOT, "OPENBLAS_NUM_THREADS": "1",
         "JAX_PLATFORMS": "cpu"}
  cmd = [sys.executable, "-m", "lie_unitary.experiments.rnn", "--config=rnn_smoke",
         "--config.model=('gurnn','tanh')", "--config.seeds=0,1", "--config.num_updates=40",
         "--cpu_devices=1", f"--workdir={tmp_path}"]
  procs = [subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True) for _ in range(2)]
  outs = [p.communicate(timeout=600)[0] for p in procs]
  assert all(p.returncode == 0 for p in procs), outs
  finished = workdir_lib.read(str(tmp_path), workdir_lib.FINISHED)
  assert sorted((r["name"], r["unit"]) for r in finished) == sorted(
      (u.name, u.id) for u in _units(cmd))
  assert "| tanh RNN | — | 0, 1 | 4 |" in (tmp_path / "report.md").read_text()
  recs = workdir_lib.read(str(tmp_path))
  keys = [(r["unit"], r["kind"], r["replicate"], r["step"]) for r in recs]
  assert len(keys) == len(set(keys)), "a record was written twice"
  assert len(workdir_lib.load_results(str(tmp_path), as_frame=False)) == len(recs)
  assert os.listdir(tmp_path / "claims") == [".lock"]


def _units(cmd):
  """The units the launcher command `cmd` computes (its --config.* flags on the smoke
  config)."""
  from lie_unitary.experiments.rnn import config as rnn_config
  from lie_unitary.experiments.rnn import experiment
  config = rnn_config.get_config("rnn_smoke")
  config.model, config.seeds, config.num_updates = ("gurnn", "tanh"), (0, 1), 40
  config.data_parallel = 1  # as the launchers' --cpu_devices=1 resolves it
  experiment.validate_config(config)
  return experiment.units(config)
