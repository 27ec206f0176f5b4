"""A launch's provenance names the machine and the environment that can change numerics."""

import sys

import jax
import pytest

from lie_unitary.experiments import workdir


def test_provenance_records_numerics_env_and_not_others(monkeypatch):
  monkeypatch.setenv("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
  monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
  monkeypatch.setenv("LIE_UNITARY_UNRELATED", "x")
  env = workdir._provenance()["env"]
  assert env["JAX_DISABLE_MOST_OPTIMIZATIONS"] == "1"
  assert env["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"
  assert "LIE_UNITARY_UNRELATED" not in env


def test_provenance_names_the_device_kind_and_cpu_model():
  p = workdir._provenance()
  assert p["device_kind"] == jax.devices()[0].device_kind
  if sys.platform != "linux":
    pytest.skip("the CPU model is read from /proc/cpuinfo on Linux")
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    names = {line.split(":", 1)[1].strip() for line in f if line.startswith("model name")}
  assert p["cpu_model"] in names
