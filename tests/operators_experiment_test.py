"""End to end: the smoke config through the launcher's library entry point.

Runs `lie_unitary/experiments/operators/config.py:smoke` (narrowed to n = 3) once per module: records
are written, the report is rendered, a rerun skips everything, the same run sharded
over 4 forced host devices (a subprocess: XLA_FLAGS must be set before jax starts)
gives the same results, and bad configs fail before any compute, naming the field.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from lie_unitary.experiments.operators import config as cfg_lib
from lie_unitary.experiments import records
from lie_unitary.experiments.operators import experiment as operator_sweep
from lie_unitary.experiments.operators import report

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _smoke():
  config = cfg_lib.get_config("smoke")
  config.n_values = (3,)
  return config


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("smoke"))
  lines = []
  computed = operator_sweep.run_experiment(_smoke(), workdir, printer=lines.append)
  return workdir, computed, lines


def test_smoke_writes_one_record_per_replicate_and_sane_losses(smoke_run):
  workdir, computed, lines = smoke_run
  assert computed == 4  # baselines, projection, arjovsky, lie_algebra
  assert sum("ETA" in line for line in lines) == 4
  recs = records.read_records(os.path.join(workdir, "results.jsonl"))
  approaches = ("true", "rand", "lstsq", "projection", "arjovsky", "lie_algebra")
  assert sorted((r["approach"], r["replicate"]) for r in recs) == sorted(
      (a, r) for a in approaches for r in range(3))
  for r in recs:
    for field in ("n", "approach", "generator", "replicate", "test_loss", "final_val_loss",
                  "steps", "seconds"):
      assert field in r
  assert [r["generator"] for r in recs if r["approach"] == "true"] == ["lie", "qr",
                                                                         "composition"]
  true = [r["test_loss"] for r in recs if r["approach"] == "true"]
  np.testing.assert_allclose(true, 6e-4, rtol=0.3)  # noise floor 2n·0.01², 500 pairs
  trained = [r for r in recs if r["optimizer"] == "sgd"]
  assert all(r["steps"] == 100 for r in trained)
  curves = records.read_records(os.path.join(workdir, "curves.jsonl"))
  assert len(curves) == 9 and all(len(c["val_loss"]) == 5 for c in curves)
  assert curves[0]["val_steps"] == [0, 25, 50, 75, 100]


def test_report_renders_tables_and_figure(smoke_run):
  workdir, _, _ = smoke_run
  paths = report.write_report(workdir)
  text = open(os.path.join(workdir, "report.md"), encoding="utf-8").read()
  assert "| 3 | 1 |" in text and "(12.5 ± 0.4)" in text and "lie_algebra" in text
  assert os.path.join(workdir, "figure2.png") in paths
  assert os.path.getsize(os.path.join(workdir, "figure2.png")) > 1000


def test_rerun_skips_finished_settings(smoke_run):
  workdir, _, _ = smoke_run
  path = os.path.join(workdir, "results.jsonl")
  before = open(path, encoding="utf-8").read()
  lines = []
  assert operator_sweep.run_experiment(_smoke(), workdir, printer=lines.append) == 0
  assert sum("already done" in line for line in lines) == 4
  assert open(path, encoding="utf-8").read() == before


def test_sharded_over_4_devices_equals_unsharded(smoke_run, tmp_path):
  workdir, _, _ = smoke_run
  script = (
      "import jax, sys\n"
      "assert jax.device_count() == 4, jax.devices()\n"
      "from lie_unitary.experiments.operators import config as c\n"
      "from lie_unitary.experiments.operators import experiment as operator_sweep\n"
      "cfg = c.get_config('smoke'); cfg.n_values = (3,)\n"
      "cfg.approaches = ('true', 'lie_algebra')\n"
      "operator_sweep.run_experiment(cfg, sys.argv[1])\n")
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
             PYTHONPATH=_ROOT, OPENBLAS_NUM_THREADS="1")
  subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, check=True,
                 cwd=_ROOT, capture_output=True, timeout=300)
  key = lambda r: (r["approach"], r["replicate"])  # noqa: E731
  sharded = {key(r): r for r in records.read_records(tmp_path / "results.jsonl")}
  single = {key(r): r for r in records.read_records(os.path.join(workdir, "results.jsonl"))}
  assert len(sharded) == 6
  for k, r in sharded.items():
    np.testing.assert_allclose(r["test_loss"], single[k]["test_loss"], rtol=1e-4)
    np.testing.assert_allclose(r["final_val_loss"], single[k]["final_val_loss"], rtol=1e-4)
  curves_s = records.read_records(tmp_path / "curves.jsonl")
  curves_1 = {c["replicate"]: c for c in records.read_records(
      os.path.join(workdir, "curves.jsonl")) if c["approach"] == "lie_algebra"}
  for c in curves_s:
    np.testing.assert_allclose(c["val_loss"], curves_1[c["replicate"]]["val_loss"], rtol=1e-4)


def test_two_worker_processes_share_the_settings_and_equal_one_process(smoke_run, tmp_path):
  workdir, _, _ = smoke_run
  env = dict(os.environ, PYTHONPATH=_ROOT, OPENBLAS_NUM_THREADS="1")
  proc = subprocess.run(
      [sys.executable, "scripts/learn_unitary.py", "--config=lie_unitary/experiments/operators/config.py:smoke",
       "--config.n_values=(3,)", "--config.approaches=('true','rand','lstsq','lie_algebra')",
       f"--workdir={tmp_path}", "--num_workers=2"],
      env=env, cwd=_ROOT, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0, proc.stderr[-2000:]
  # Each setting ran in exactly one worker: the other skipped it (as taken, or as done
  # if it got there after the records were written); both workers started.
  for w in ("[worker 0/2]", "[worker 1/2]"):
    assert w in proc.stdout
  skips = proc.stdout.count("taken by another worker") + proc.stdout.count("already done")
  assert skips == 2 and proc.stdout.count("ETA") == 2, proc.stdout  # 2 settings
  assert not any(name.startswith(".claims-") for name in os.listdir(tmp_path))
  key = lambda r: (r["approach"], r["replicate"])  # noqa: E731
  recs = records.read_records(tmp_path / "results.jsonl")
  assert sorted(key(r) for r in recs) == sorted(
      (a, r) for a in ("true", "rand", "lstsq", "lie_algebra") for r in range(3))
  single = {key(r): r for r in records.read_records(os.path.join(workdir, "results.jsonl"))}
  for r in recs:
    np.testing.assert_allclose(r["test_loss"], single[key(r)]["test_loss"], rtol=1e-5)
  assert os.path.exists(tmp_path / "report.md")  # the parent wrote it after the workers


@pytest.mark.parametrize("field,value,match", [
    ("approaches", ("lie_algebra", "bogus"), "config.approaches"),
    ("n_values", (0, 3), "config.n_values"),
    ("generators", ("nope",), "config.generators"),
    ("num_epochs", ((6, 1),), "config.num_epochs"),
    ("optimizer", "adam", "config.optimizer"),
    ("val_every", 33, "config.val_every"),
    ("basis_scales", (5.0,), "config.basis_scales"),
])
def test_bad_config_values_fail_before_compute(field, value, match, tmp_path):
  config = _smoke()
  config[field] = value
  with pytest.raises(ValueError, match=match):
    operator_sweep.run_experiment(config, str(tmp_path / "w"))
  assert not os.path.exists(tmp_path / "w")


def test_unknown_config_key_fails_in_the_launcher_naming_it(tmp_path):
  env = dict(os.environ, PYTHONPATH=_ROOT)
  proc = subprocess.run(
      [sys.executable, "scripts/learn_unitary.py", "--config=lie_unitary/experiments/operators/config.py:smoke",
       "--config.no_such_field=1", f"--workdir={tmp_path}"],
      env=env, cwd=_ROOT, capture_output=True, text=True, timeout=120)
  assert proc.returncode != 0 and "no_such_field" in proc.stderr
  assert not os.path.exists(tmp_path / "results.jsonl")


def test_every_variant_is_valid_and_documented():
  for variant in cfg_lib.VARIANTS:
    config = cfg_lib.get_config(variant)
    operator_sweep.validate_config(config)
    assert f":{variant}" in cfg_lib.__doc__ or f"- {variant}:" in cfg_lib.__doc__
  assert json.loads(cfg_lib.get_config("table1").to_json())["num_replicates"] == 18
  with pytest.raises(ValueError, match="variant"):
    cfg_lib.get_config("nope")
