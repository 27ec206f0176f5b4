"""The launchers' CPU devices: one per core by default, one with --cpu_devices=1, and an
RNN unit's split of each batch, part of its identity, as resolved on those devices."""

import json
import os
import subprocess
import sys

import pytest

from lie_unitary.experiments import launch

import helpers

FLAG = "xla_force_host_platform_device_count"


@pytest.mark.slow
def test_the_launcher_uses_every_core_unless_told_one(tmp_path):
  cores = launch.cpu_cores()
  run = lambda flag, name, *config, env=None: lambda: helpers.launcher(
      "rnn", "--config=rnn_smoke", *config, f"--workdir={tmp_path / name}", flag, cwd=tmp_path,
      env=env)
  smoke = ("--config.model=('gurnn',)", "--config.num_updates=2")
  # --cpu_devices=0 is the default (helpers.launcher passes 1 unless told); a count in
  # XLA_FLAGS wins over the flag.
  forced = {"XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --{FLAG}=1".strip()}
  every, one, bad = helpers.concurrently(run("--cpu_devices=0", "every", *smoke),
                                         run("--cpu_devices=3", "one", *smoke, env=forced),
                                         run("--cpu_devices=-1", "bad"))
  assert bad.returncode == 2 and "--cpu_devices=-1" in bad.stderr
  for out, name, devices in ((every, "every", cores), (one, "one", 1)):
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"on {devices} device(s)" in out.stdout, out.stdout
    recs = [json.loads(line) for line in open(tmp_path / name / "results.jsonl")]
    # The smoke config's batch of 20 split over the most devices that divide it.
    split = max(d for d in range(1, devices + 1) if devices % d == 0 and 20 % d == 0)
    assert {r["data_parallel"] for r in recs} == {split}


@pytest.mark.slow
def test_a_resumed_unit_loads_its_programs_from_the_compilation_cache(tmp_path):
  cache = tmp_path / "xla"
  # The tests' own cache (JAX_COMPILATION_CACHE_DIR) would win over the flag.
  env = {"JAX_COMPILATION_CACHE_DIR": "", "JAX_LOG_COMPILES": "1"}
  run = lambda updates: helpers.launcher(
      "rnn", "--config=rnn_smoke", "--config.model=('gurnn',)", f"--config.num_updates={updates}",
      "--config.val_every=2", f"--workdir={tmp_path / 'w'}", f"--compilation_cache={cache}",
      cwd=tmp_path, env=env)
  first = run(2)
  assert first.returncode == 0, first.stderr[-3000:]
  entries = set(os.listdir(cache))
  assert entries and "Persistent compilation cache hit" not in first.stderr
  resumed = run(4)
  assert resumed.returncode == 0 and "resumed at step 2" in resumed.stdout, resumed.stdout
  # Every program the resumed run compiled was loaded from the cache: no new entry.
  assert set(os.listdir(cache)) == entries
  assert resumed.stderr.count("Persistent compilation cache hit") == resumed.stderr.count(
      "Finished XLA compilation"), resumed.stderr[-3000:]


# On N forced host devices: how many devices each default image unit computes on (its
# replicates, padded to the mesh's replicate axis, times the devices splitting a batch).
_OCCUPANCY = r"""
import sys
import jax
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments.rnn import config, experiment
for name in ("permuted_mnist", "pixel_mnist"):
  for unit in experiment.units(config.get_config(name)):
    spec = unit.spec
    replicas = replicas_lib.Replicas(spec.num_replicates, replicas_lib.replicate_sharding(
        data_parallel=spec.data_parallel))
    rows = replicas.mesh.shape[replicas_lib.AXIS]  # devices along the replicate axis
    busy = min(spec.num_replicates, rows) * replicas.mesh.shape.get(replicas_lib.DATA_AXIS, 1)
    print(name, unit.label, jax.device_count(), busy)
"""


@pytest.mark.slow
@pytest.mark.parametrize("devices", [1, 2, 4])
def test_a_default_image_config_occupies_every_device(devices):
  env = {**os.environ, "PYTHONPATH": helpers.ROOT, "JAX_PLATFORMS": "cpu",
         "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} --{FLAG}={devices}".strip()}
  proc = subprocess.run([sys.executable, "-c", _OCCUPANCY], capture_output=True, text=True,
                        env=env, timeout=120)
  assert proc.returncode == 0, proc.stderr[-3000:]
  lines = proc.stdout.split("\n")[:-1]
  assert len(lines) == 18, proc.stdout  # 2 configs × 3 models × 3 seeds
  for line in lines:
    count, busy = map(int, line.split()[-2:])
    assert count == devices and busy == devices, line
