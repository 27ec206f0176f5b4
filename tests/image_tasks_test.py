"""Sequential-image tasks (pixel and permuted) on small IDX sets the tests write.

References: numpy (the split, the permutation, accuracy), the models' parameter leaves
(the counts), and an uninterrupted run (a run resumed mid-epoch).
"""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary import nn as lnn
from lie_unitary.experiments import loop
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import experiment as rnn
from lie_unitary.experiments.rnn import images

import helpers
from idx_files import HW
from idx_files import write_image_folder

pytestmark = pytest.mark.usefixtures("fast_compiles")


def _config(folder, **fields):
  c = rnn_config.get_config("permuted_mnist")
  c.dataset = folder
  c.T = (HW[0] * HW[1],)
  c.num_validation, c.eval_batch_size, c.batch_size = 64, 32, 32
  c.num_replicates, c.num_updates, c.val_every = 2, 12, 3
  c.seeds = (0,)
  for m in c.models.values():
    m.hidden_size = 8
  c.model = ("gurnn",)
  for k, v in fields.items():
    c[k] = v
  return c


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
  return write_image_folder(tmp_path_factory.mktemp("idx"))


def test_sets_split_the_last_images_off_and_permute_every_set_alike(folder):
  pixel = data.load_image_sets(folder, "pixel", num_validation=64)
  perm = data.load_image_sets(folder, "permuted", seed=3, num_validation=64)
  order = np.random.RandomState(3).permutation(16)
  train_x, _, _, test_y = map(images.read_idx, images.check_dataset_files(folder))
  np.testing.assert_array_equal(pixel.train_x, train_x.reshape(256, 16)[:192])
  np.testing.assert_array_equal(pixel.val_x, train_x.reshape(256, 16)[192:])
  np.testing.assert_array_equal(pixel.test_y, test_y)
  for a, b in zip(perm, pixel):
    np.testing.assert_array_equal(a, b[:, order] if b.ndim == 2 else b)
  for bad in (256, 0, -1, 2.5, True):
    with pytest.raises(ValueError, match=r"num_validation must be an integer in 1\.\.255"):
      data.load_image_sets(folder, "pixel", num_validation=bad)


def test_accuracy_and_loss_against_numpy():
  logits = jnp.array([[0.1, 2.0, -1.0], [3.0, 0.0, 0.5], [0.0, 0.0, 1.0], [1.0, 2.0, 3.0]])
  labels = jnp.array([1, 2, 2, 0])
  assert float(data.accuracy(logits, labels)) == 0.5
  p = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
  np.testing.assert_allclose(float(data.classification_loss(logits, labels)),
                             -np.mean(np.log(p[np.arange(4), labels])), rtol=1e-6)
  np.testing.assert_allclose(data.image_inputs(jnp.array([[0, 255]], jnp.uint8))[..., 0],
                             [[0.0, 1.0]])


@pytest.mark.parametrize("model,activation", [("gurnn", "modrelu"), ("orthogonal", ""),
                                              ("lstm", "")])
def test_parameter_counts_are_the_models_leaves(model, activation, folder):
  config = _config(folder, model=(model,))
  for m in config.models.values():
    m.hidden_size = 7
  spec = rnn.make_unit(config, model, 16, 0).spec
  exp = rnn.make_experiment(spec, None, data.image_source(spec, 192))
  params = exp.init(jnp.arange(1, dtype=jnp.int32)).params["params"]
  leaves = sum(int(np.prod(a.shape[1:])) for a in jax.tree.leaves(params))
  assert rnn.num_params(model, 7, 1, 10, activation or "relu") == leaves


def test_budgets_size_each_model_to_the_orthogonal_rnns_count():
  for budget, sizes in rnn_config.BUDGETS.items():
    target = rnn.num_params("orthogonal", sizes["orthogonal"], 1, 10)
    for model in ("gurnn", "lstm"):
      h = rnn.budget_hidden_size(model, budget)
      count = lambda k: rnn.num_params(model, k, 1, 10, "modrelu")
      assert abs(count(h) - target) <= min(abs(count(h - 1) - target),
                                           abs(count(h + 1) - target)), (budget, model)


def test_epoch_orders_are_a_function_of_the_replicates_key_and_epoch(folder):
  spec = rnn.make_unit(_config(folder), "gurnn", 16, 0).spec
  exp = rnn.make_experiment(spec, None, data.image_source(spec, 192))
  ids = jnp.arange(2, dtype=jnp.int32)
  a, b, c = exp.epoch_data(ids, 0), exp.epoch_data(ids, 0), exp.epoch_data(ids, 1)
  np.testing.assert_array_equal(a, b)
  assert not np.array_equal(a[0], a[1]) and not np.array_equal(a, c)
  for row in np.concatenate([np.asarray(a), np.asarray(c)]):
    np.testing.assert_array_equal(np.sort(row), np.arange(192))
  assert exp.source.updates_per_epoch == 6


def test_an_image_gurnn_refreshes_lambda_in_training_like_a_synthetic_one(folder):
  # One step for every task: a rebase before update 0 moves U(λ_init) into the base
  # and restarts λ from 0, so one small update later λ is far smaller than at init.
  config = _config(folder, lambda_refresh="rebase", lambda_refresh_every=4)
  spec = rnn.make_unit(config, "gurnn", 16, 0).spec
  exp = rnn.make_experiment(spec, None, data.image_source(spec, 192))
  sets = data.ImageSets(*map(jnp.asarray, data.load_image_sets(folder, "permuted",
                                                               num_validation=64)))
  ids = jnp.arange(2, dtype=jnp.int32)
  start = exp.init(ids)
  lam_init = np.abs(np.asarray(start.params["params"]["cell"]["lam"])).max()
  state, train = exp.train_chunk(start, ids, 0, 1, exp.epoch_data(ids, 0), sets)
  assert np.abs(np.asarray(state.params["params"]["cell"]["lam"])).max() < 0.1 * lam_init
  base = np.asarray(state.params[lnn.BASE_COLLECTION]["cell"]["base"])
  assert np.abs(base - np.eye(8)).max() > 0.1
  assert sorted(train) == ["accuracy", "loss"] and train["loss"].shape == (2, spec.val_every)


def test_validation_and_test_sets_are_one_compiled_evaluation(folder):
  # Reference: each replicate's model applied to each whole set at once, in numpy.
  # 96 validation images, 64 test images: sets of two sizes.
  spec = rnn.make_unit(_config(folder, model=("orthogonal",), num_validation=96),
                       "orthogonal", 16, 0).spec
  exp = rnn.make_experiment(spec, None, data.image_source(spec, 160))
  sets = data.ImageSets(*map(jnp.asarray, data.load_image_sets(folder, "permuted",
                                                               num_validation=96)))
  params = exp.init(jnp.arange(2, dtype=jnp.int32)).params
  model = rnn.make_model(spec)
  got = {name: jax.device_get(exp.evaluate(params, s))
         for name, s in exp.source.val_sets(sets).items()}
  assert exp.evaluate._cache_size() == 1
  for name, x, y in (("val", sets.val_x, sets.val_y), ("test", sets.test_x, sets.test_y)):
    for r in range(2):
      logits = np.asarray(model.apply(jax.tree.map(lambda a: a[r], params),
                                      np.asarray(x, np.float32)[..., None] / 255.0))
      one_hot = np.eye(10)[np.asarray(y)]
      shifted = logits - logits.max(-1, keepdims=True)
      log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
      loss = -np.mean(np.sum(one_hot * log_softmax, -1))
      np.testing.assert_allclose(got[name]["loss"][r], loss, rtol=1e-5)
      np.testing.assert_allclose(got[name]["accuracy"][r],
                                 np.mean(logits.argmax(-1) == np.asarray(y)), rtol=1e-6)


def test_missing_files_fail_before_the_workdir_exists(tmp_path):
  config = _config(str(tmp_path / "nothing"))
  with pytest.raises(runner.ConfigError, match="config.dataset"):
    rnn.train_and_evaluate(config, str(tmp_path / "w"), printer=lambda *_: None)
  assert not (tmp_path / "w").exists()
  config = _config(str(tmp_path), model=("tanh",))
  with pytest.raises(runner.ConfigError, match="models of the image tasks"):
    rnn.validate_config(config)
  # A budget with sizes given: the budget replaced them in silence.
  config = _config(str(tmp_path), param_budget="69k")
  with pytest.raises(runner.ConfigError, match="'' where a model's hidden_size is set"):
    rnn.validate_config(config)


@pytest.mark.parametrize("field,value,match", [
    ("T", (784,), r"config\.T = \(784,\): expected \(16,\), the pixel count"),
    ("num_validation", 256, r"config\.num_validation = 256: expected 1\.\.255 \(.* holds 256 "),
    ("batch_size", 200, r"config\.batch_size = 200: expected at most the 192 training images"),
    ("eval_batch_size", 48, r"config\.eval_batch_size = 48: expected a divisor of the 64 test"),
], ids=["T", "num_validation", "batch_size", "eval_batch_size"])
def test_sizes_that_do_not_fit_the_files_fail_before_the_workdir_exists(
    folder, tmp_path, field, value, match):
  config = _config(folder, **{field: value})
  if field == "eval_batch_size":  # it must divide num_validation too
    config.num_validation = 96
  with pytest.raises(runner.ConfigError, match=match):
    rnn.train_and_evaluate(config, str(tmp_path / "w"), printer=lambda *_: None)
  assert not (tmp_path / "w").exists()


def _losses(workdir):
  return {(r["kind"], r["replicate"], r["step"]): (r.get("train_loss"), r.get("val_accuracy"),
                                                   r.get("num_params"))
          for r in workdir_lib.read(workdir)}


@pytest.mark.slow
def test_a_run_resumed_mid_epoch_equals_an_uninterrupted_run(folder, tmp_path):
  quiet = dict(printer=lambda *_: None, handle_signals=False)
  rnn.train_and_evaluate(_config(folder), str(tmp_path / "whole"), **quiet)
  # 9 updates: one epoch and a half (6 per epoch); then extended to 12.
  rnn.train_and_evaluate(_config(folder, num_updates=9), str(tmp_path / "parts"), **quiet)
  lines = []
  rnn.train_and_evaluate(_config(folder), str(tmp_path / "parts"), printer=lines.append,
                         handle_signals=False)
  assert any("resumed at step 9" in line for line in lines), lines
  whole, parts = _losses(tmp_path / "whole"), _losses(tmp_path / "parts")
  for key, value in whole.items():
    assert parts[key] == value, key
  finals = [r for r in workdir_lib.read(tmp_path / "whole") if r["kind"] == "final"]
  assert len(finals) == 2
  assert all(r["num_params"] == rnn.num_params("gurnn", 8, 1, 10, "modrelu")
             for r in finals)
  # The toy set is learnable: the best validation accuracy beats chance (0.1).
  val = [x for x in workdir_lib.read(tmp_path / "whole") if x["kind"] == "val"]
  assert max(x["val_accuracy"] for x in val) > 0.3


@pytest.mark.slow
def test_a_stop_during_an_evaluation_checkpoints_after_it_and_resumes_alike(folder, tmp_path,
                                                                           monkeypatch):
  quiet = dict(printer=lambda *_: None, handle_signals=False)
  rnn.train_and_evaluate(_config(folder), str(tmp_path / "whole"), **quiet)
  stop, write = loop.StopRequest(), runner.UnitContext.write

  def ctrl_c_while_evaluating(self, records, *args):  # as if Ctrl-C came during step 6's
    write(self, records, *args)
    if any(r.get("kind") == "val" and r["step"] == 6 for r in records):
      stop.request("SIGINT")

  monkeypatch.setattr(runner.UnitContext, "write", ctrl_c_while_evaluating)
  config, parts = _config(folder), str(tmp_path / "parts")
  lines = []
  summary = runner.train_and_evaluate(rnn, config, parts, printer=lines.append, stop=stop)
  assert summary.stopped_by and any("stopped at a checkpoint (SIGINT)" in x for x in lines)
  # The evaluation under way finished and was recorded; nothing after it ran.
  assert max(r["step"] for r in workdir_lib.read(parts)) == 6
  monkeypatch.setattr(runner.UnitContext, "write", write)
  rnn.train_and_evaluate(config, parts, printer=lines.append, handle_signals=False)
  assert any("resumed at step 6" in line for line in lines), lines
  whole, resumed = _losses(tmp_path / "whole"), _losses(parts)
  assert resumed == whole


@pytest.mark.slow
def test_the_launcher_runs_a_small_idx_set_end_to_end(folder, tmp_path):
  args = ["--config=permuted_mnist", f"--config.dataset={folder}", "--config.T=(16,)",
          "--config.num_validation=64", "--config.eval_batch_size=32",
          "--config.batch_size=32", "--config.num_replicates=1", "--config.num_updates=6",
          "--config.seeds=0",
          "--config.val_every=3", "--config.model=('orthogonal','lstm')",
          "--config.models.orthogonal.hidden_size=6", "--config.models.lstm.hidden_size=5",
          f"--workdir={tmp_path / 'w'}"]
  proc = helpers.launcher("rnn", *args, cwd=tmp_path)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
  finals = [r for r in workdir_lib.read(tmp_path / "w") if r["kind"] == "final"]
  assert sorted(r["model"] for r in finals) == ["lstm", "orthogonal"]
  report = (tmp_path / "w" / "report.md").read_text()
  # The image table with the parameter counts of finished units; no synthetic-task text.
  assert f"### permuted {folder} (T = 784)" in report and "unfinished" not in report
  assert f"{rnn.num_params('orthogonal', 6, 1, 10):,}" in report
  assert "random baseline" not in report


def test_the_progress_line_names_replicates_with_a_nan_loss():
  # The image tasks' progress line leads with an accuracy, which a nan loss leaves at
  # chance without saying why: the note does.
  assert loop.nonfinite_note(np.array([0.5, 0.4])) == ""
  note = loop.nonfinite_note(np.array([np.nan, 0.4, np.inf]), "training loss")
  assert note == "; 2 of 3 replicates have a nan/inf training loss"


def test_the_real_fashion_mnist_files_when_installed():
  folder = images.DATASETS["fashion_mnist"]["system_folders"][0]
  if not os.path.isdir(folder):
    pytest.skip(f"Fashion-MNIST is not installed ({folder}: apt-get install "
                "dataset-fashion-mnist).")
  sets = data.load_image_sets(folder, "permuted")
  assert sets.train_x.shape == (55_000, 784) and sets.val_x.shape == (5_000, 784)
  assert sets.test_x.shape == (10_000, 784) and set(np.unique(sets.test_y)) == set(range(10))
