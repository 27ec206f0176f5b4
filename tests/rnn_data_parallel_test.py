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

from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import experiment

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_TWO_DEVICES = textwrap.dedent("""
    import jax, numpy as np
    jax.config.update("jax_num_cpu_devices", 2)
    from lie_unitary.experiments import replicas as replicas_lib
    from lie_unitary.experiments.rnn import config as C, experiment as E

    def train(model, data_parallel, steps=6, **fields):
      cfg = C.get_config("rnn_smoke")
      cfg.h0, cfg.num_replicates, cfg.batch_size = "zeros", 3, 8
      cfg.data_parallel = data_parallel
      for k, v in fields.items():
        if k.startswith("models."):
          cfg.models.gurnn[k.split(".")[-1]] = v
        else:
          cfg[k] = v
      E.validate_config(cfg)
      spec = E.make_unit(cfg, model, cfg.T[0], 0).spec
      sharding = replicas_lib.replicate_sharding(data_parallel=data_parallel)
      exp = E.make_experiment(spec, sharding)
      padded = replicas_lib.padded_size(3, sharding.mesh.shape[replicas_lib.AXIS])
      ids = jax.make_array_from_callback(
          (padded,), sharding, lambda i: np.arange(padded, dtype=np.int32)[i])
      state, train = exp.train_chunk(exp.init(ids), ids, 0, steps, None, None)
      return jax.tree.map(lambda a: np.asarray(a)[:3], state.params), np.asarray(train["loss"])[:3]

    # hidden 128: large enough that two devices' batched eighs at once would deadlock;
    # there RMSProp's first steps (about lr·sign(g)) turn rounding in the tiniest
    # gradients into differences of up to 1e-4 (lr = 1e-3).
    for model, fields, atol in [
        ("gurnn", {}, 2e-6),
        ("gurnn", {"lambda_refresh": "rebase", "lambda_refresh_every": 2}, 2e-6),
        ("gurnn", {"models.gurnn.hidden_size": 128}, 2e-4)]:
      (p1, l1), (p2, l2) = train(model, 1, **fields), train(model, 2, **fields)
      np.testing.assert_allclose(l2, l1, rtol=2e-5)
      for a, b in zip(jax.tree.leaves(p1), jax.tree.leaves(p2)):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=atol)
      if not fields:  # the comparison is not of untrained states
        p0, _ = train(model, 1, steps=0)
        assert max(np.max(np.abs(a - b)) for a, b in zip(jax.tree.leaves(p0),
                                                        jax.tree.leaves(p1))) > 1e-3
      print("ok", model, fields, l1)
""")


_TWO_DEVICES_IMAGES = textwrap.dedent("""
    import sys
    import jax, numpy as np
    jax.config.update("jax_num_cpu_devices", 2)
    sys.path.insert(0, "tests")
    from idx_files import write_image_folder
    from lie_unitary.experiments import replicas as replicas_lib
    from lie_unitary.experiments.rnn import config as C, data as D, experiment as E

    folder = write_image_folder(sys.argv[1])

    def train(model, data_parallel, steps=6):
      cfg = C.get_config("permuted_mnist")
      cfg.dataset, cfg.T, cfg.num_replicates, cfg.data_parallel = folder, (16,), 3, data_parallel
      cfg.num_validation, cfg.eval_batch_size, cfg.batch_size = 64, 32, 32
      for m in cfg.models.values():
        m.hidden_size = 8
      E.validate_config(cfg)
      spec = E.make_unit(cfg, model, 16, 0).spec
      assert spec.data_parallel == data_parallel  # a unit of its own
      replicas = replicas_lib.Replicas(
          3, replicas_lib.replicate_sharding(data_parallel=data_parallel))
      sets = jax.device_put(D.load_image_sets(folder, spec.task, spec.permutation_seed, 64),
                            jax.sharding.NamedSharding(replicas.mesh, jax.sharding.PartitionSpec()))
      exp = E.make_experiment(spec, replicas.sharding, D.image_source(spec, sets.train_y.shape[0]))
      state = exp.init(replicas.ids)
      order = exp.epoch_data(replicas.ids, 0)
      state, train = exp.train_chunk(state, replicas.ids, 0, steps, order, sets)
      ev = exp.evaluate(state.params, exp.source.val_sets(sets)["val"])
      return replicas.gather((state.params, train, ev))

    # PyTorch's RMSProp (ε outside the root) takes nearly full steps, up to 10·lr at
    # first, on gradients as small as their rounding: parameters part by up to 3e-6
    # (jax 0.8.0), 3e-4 of such a step.
    for model in ("gurnn", "orthogonal", "lstm"):
      one, two = train(model, 1), train(model, 2)
      for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(two)):
        np.testing.assert_allclose(b, a, rtol=2e-4, atol=1e-5)
      untrained = train(model, 1, steps=0)[0]
      assert max(np.max(np.abs(a - b)) for a, b in zip(jax.tree.leaves(untrained),
                                                      jax.tree.leaves(one[0]))) > 1e-3
      print("ok", model, one[1]["loss"], one[2]["accuracy"])
""")


@pytest.mark.slow
def test_two_devices_match_one_on_the_image_tasks(tmp_path):
  # The images of each batch (and of each evaluation batch) are split over the devices,
  # one replicate at a time on each (two devices' batched eighs at once deadlock).
  env = dict(os.environ, PYTHONPATH=_ROOT, JAX_PLATFORMS="cpu", OPENBLAS_NUM_THREADS="1")
  out = subprocess.run([sys.executable, "-c", _TWO_DEVICES_IMAGES, str(tmp_path)], env=env,
                       capture_output=True, text=True, timeout=300, cwd=_ROOT)
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
  assert out.stdout.count("ok") == 3, out.stdout


def test_the_split_enters_every_units_identity_as_resolved():
  config = rnn_config.get_config("permuted_mnist")
  config.data_parallel = 0  # every device: here, in the test process, one
  assert all(experiment.make_unit(config, m, 784, 0).spec.data_parallel == 1
             for m in ("gurnn", "orthogonal", "lstm"))
  config.data_parallel = 2
  assert all(experiment.make_unit(config, m, 784, 0).spec.data_parallel == 2
             for m in ("gurnn", "orthogonal", "lstm"))
  ids = {experiment.units(config)[0].id}
  config.data_parallel = 1
  assert experiment.units(config)[0].id not in ids


def test_data_parallel_zero_takes_the_most_devices_that_divide_the_batches(monkeypatch):
  config = rnn_config.get_config("permuted_mnist")
  config.data_parallel = 0
  for count, batch, eval_batch, want in ((2, 128, 500, 2), (4, 128, 500, 4), (3, 128, 500, 1),
                                         (4, 20, 500, 4), (4, 128, 250, 2), (8, 12, 500, 4)):
    monkeypatch.setattr(jax, "device_count", lambda count=count: count)
    config.batch_size, config.eval_batch_size = batch, eval_batch
    assert experiment.data_parallel(config) == want, (count, batch, eval_batch)
  config.task = "adding"  # no evaluation batches to split
  config.batch_size, config.eval_batch_size = 20, 7
  assert experiment.data_parallel(config) == 4


def test_an_image_experiment_checks_its_data_axis():
  config = rnn_config.get_config("permuted_mnist")
  config.batch_size, config.eval_batch_size = 32, 32
  config.h0 = "random"
  config.data_parallel = 2
  spec = experiment.make_unit(config, "gurnn", 784, 0).spec
  with pytest.raises(ValueError, match="needs a sharding whose mesh has a 'data' axis"):
    experiment.make_experiment(spec, replicas_lib.replicate_sharding(), data.image_source(spec, 64))


@pytest.mark.slow
def test_two_devices_match_one():
  env = dict(os.environ, PYTHONPATH=_ROOT, JAX_PLATFORMS="cpu", OPENBLAS_NUM_THREADS="1")
  out = subprocess.run([sys.executable, "-c", _TWO_DEVICES], env=env, capture_output=True,
                       text=True, timeout=300)
  assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
  assert out.stdout.count("ok") == 3, out.stdout


def test_data_parallel_is_part_of_a_synthetic_units_identity():
  config = rnn_config.get_config("rnn_smoke")
  one = experiment.make_unit(config, "gurnn", 10, 0).spec
  config.data_parallel = 2
  two = experiment.make_unit(config, "gurnn", 10, 0).spec
  assert one.data_parallel == 1 and two.data_parallel == 2


@pytest.mark.parametrize("value, message", [
    (3, "a divisor of batch_size"), (-1, "an integer ≥ 0")])
def test_bad_data_parallel_is_named(value, message):
  config = rnn_config.get_config("rnn_smoke")
  config.batch_size = 20
  config.data_parallel = value
  with pytest.raises(runner.ConfigError, match=f"data_parallel.*{message}"):
    experiment.validate_config(config)


def test_an_image_task_needs_data_parallel_to_divide_its_evaluation_batches(tmp_path):
  from idx_files import write_image_folder
  config = rnn_config.get_config("permuted_mnist")
  config.dataset = write_image_folder(tmp_path)
  config.T, config.num_validation = (16,), 64
  config.batch_size, config.eval_batch_size, config.data_parallel = 32, 1, 2
  with pytest.raises(runner.ConfigError, match="data_parallel.*a divisor of eval_batch_size"):
    experiment.validate_config(config)


def test_more_data_parallel_than_devices_is_named():
  config = rnn_config.get_config("rnn_smoke")
  config.batch_size = 4 * jax.device_count()
  config.data_parallel = 2 * jax.device_count()
  with pytest.raises(runner.ConfigError, match="a divisor of the device count"):
    experiment.validate_config(config)
  with pytest.raises(ValueError, match="must be ≥ 1 and divide"):
    replicas_lib.replicate_sharding(data_parallel=2 * jax.device_count())


def test_data_parallel_spec_needs_its_mesh():
  config = rnn_config.get_config("rnn_smoke")
  config.data_parallel = 2
  spec = experiment.make_unit(config, "gurnn", 10, 0).spec
  with pytest.raises(ValueError, match="needs a sharding whose mesh has a 'data' axis"):
    experiment.make_experiment(spec, replicas_lib.replicate_sharding())
