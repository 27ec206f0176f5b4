"""Data parallelism of one RNN training run: each replicate's batch split over devices.

With zero initial states the split changes nothing but the order of float sums, so a
run on two devices must match one device's to float32 rounding; the reference is the
one-device program (itself pinned by the golden tests). The two-device runs happen in
a subprocess with two CPU devices (the device count is fixed when jax starts).
"""

import os
import subprocess
import sys
import textwrap

import jax
import pytest

from lie_unitary.experiments import runner
from lie_unitary.experiments import sweep
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import experiment
from lie_unitary.experiments.rnn import trainer as training

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_TWO_DEVICES = textwrap.dedent("""
    import jax, numpy as np
    jax.config.update("jax_num_cpu_devices", 2)
    from lie_unitary.experiments import sweep
    from lie_unitary.experiments.rnn import config as C, experiment as E, training as TR

    def train(model, data_parallel, steps=6, **fields):
      cfg = C.get_config("smoke")
      cfg.h0, cfg.num_replicates, cfg.batch_size = "zeros", 3, 8
      cfg.data_parallel = data_parallel
      for k, v in fields.items():
        cfg[k] = v
      E.validate_config(cfg)
      spec = E.unit_spec(cfg, model, cfg.T[0])
      sharding = sweep.replicate_sharding(data_parallel=data_parallel)
      exp = TR.make_experiment(spec, sharding)
      padded = sweep.padded_size(3, sharding.mesh.shape[sweep.AXIS])
      ids = jax.make_array_from_callback(
          (padded,), sharding, lambda i: np.arange(padded, dtype=np.int32)[i])
      state, loss = exp.train_chunk(exp.init(ids), ids, 0, steps)
      return jax.tree.map(lambda a: np.asarray(a)[:3], state.params), np.asarray(loss)[:3]

    for model, fields in [("gurnn", {}),
                          ("gurnn", {"lambda_refresh": "rebase", "lambda_refresh_every": 2})]:
      (p1, l1), (p2, l2) = train(model, 1, **fields), train(model, 2, **fields)
      np.testing.assert_allclose(l2, l1, rtol=2e-5)
      for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p2)):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=2e-6)
      if not fields:  # the comparison is not of untrained states
        p0, _ = train(model, 1, steps=0)
        assert max(np.max(np.abs(a - b)) for a, b in zip(jax.tree.leaves(p0),
                                                        jax.tree.leaves(p1))) > 1e-3
      print("ok", model, fields, l1)
""")


@pytest.mark.slow
def test_two_devices_match_one():
  env = dict(os.environ, PYTHONPATH=_ROOT, JAX_PLATFORMS="cpu", OPENBLAS_NUM_THREADS="1")
  out = subprocess.run([sys.executable, "-c", _TWO_DEVICES], env=env, capture_output=True,
                       text=True, timeout=300)
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
  assert out.stdout.count("ok") == 2, out.stdout


def test_data_parallel_is_part_of_the_identity_only_when_used():
  config = rnn_config.get_config("smoke")
  one = experiment.unit_spec(config, "gurnn", 10)
  config.data_parallel = 2
  two = experiment.unit_spec(config, "gurnn", 10)
  assert "data_parallel" not in one and two.data_parallel == 2


@pytest.mark.parametrize("value, message", [
    (3, "a divisor of batch_size"), (0, "an integer ≥ 1")])
def test_bad_data_parallel_is_named(value, message):
  config = rnn_config.get_config("smoke")
  config.batch_size = 20
  config.data_parallel = value
  with pytest.raises(runner.ConfigError, match=f"data_parallel.*{message}"):
    experiment.validate_config(config)


def test_more_data_parallel_than_devices_is_named():
  config = rnn_config.get_config("smoke")
  config.batch_size = 4 * jax.device_count()
  config.data_parallel = 2 * jax.device_count()
  with pytest.raises(runner.ConfigError, match="a divisor of the device count"):
    experiment.validate_config(config)
  with pytest.raises(ValueError, match="must be ≥ 1 and divide"):
    sweep.replicate_sharding(data_parallel=2 * jax.device_count())


def test_data_parallel_spec_needs_its_mesh():
  config = rnn_config.get_config("smoke")
  config.data_parallel = 2
  spec = experiment.unit_spec(config, "gurnn", 10)
  with pytest.raises(ValueError, match="needs a sharding whose mesh has a 'data' axis"):
    training.make_experiment(spec, sweep.replicate_sharding())
