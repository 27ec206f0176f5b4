"""Smoke tests of RNN training: every model, records, resume, optimizers, report."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from lie_unitary.experiments.rnn import config as rnn_configs
from lie_unitary.experiments import records
from lie_unitary.experiments.rnn import report as rnn_report
from lie_unitary.experiments.rnn import training as rnn_training

ALL_MODELS = ("gurnn", "gurnn_beta", "urnn", "lstm", "irnn", "tanh", "free")


pytestmark = pytest.mark.usefixtures("fast_compiles")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("smoke"))
  config = rnn_configs.get_config("smoke")
  config.model = ",".join(ALL_MODELS)
  rnn_training.train_and_evaluate(config, workdir, printer=lambda *_: None)
  return config, workdir, records.read_records(os.path.join(workdir, "results.jsonl"))


@pytest.mark.parametrize("model", ALL_MODELS)
def test_smoke_loss_finite_and_decreasing(smoke_run, model):
  config, _, recs = smoke_run
  mine = [r for r in recs if r["model"] == model]
  for seed in range(config.num_seeds):
    val = {r["update"]: r["val_loss"] for r in mine if r["kind"] == "val" and r["seed"] == seed}
    assert sorted(val) == [0, 20, 40, 60]
    assert all(np.isfinite(v) for v in val.values())
    assert val[60] < val[0], val
    train = {r["update"]: r["train_loss"] for r in mine
             if r["kind"] == "val" and r["seed"] == seed and r["update"] > 0}
    assert train[60] < train[20], train
    final = [r for r in mine if r["kind"] == "final" and r["seed"] == seed]
    assert len(final) == 1 and final[0]["update"] == 60
    assert np.isfinite(final[0]["test_loss"]) and np.isfinite(final[0]["val_loss"])
    assert final[0]["T"] == 10 and final[0]["task"] == "adding"


def test_smoke_copy_long_setting(tmp_path):
  # The copy_long recipe (modReLU, diagonal phases, its own λ learning rate) at smoke size.
  long = rnn_configs.get_config("copy_long")
  config = rnn_configs.get_config("smoke")
  for field in ("activation", "lambda_init", "lambda_optimizer", "lambda_learning_rate", "h0"):
    config[field] = long[field]
  config.model, config.num_seeds = "gurnn", 1
  rnn_training.train_and_evaluate(config, str(tmp_path), printer=lambda *_: None)
  recs = records.read_records(os.path.join(tmp_path, "results.jsonl"))
  val = {r["update"]: r["val_loss"] for r in recs if r["kind"] == "val"}
  assert recs[-1]["activation"] == "modrelu" and recs[-1]["lambda_init"] == "phases"
  assert all(np.isfinite(v) for v in val.values()) and val[60] < val[0], val
  # The report names the setting, not just the model.
  rnn_report.write_report(str(tmp_path))
  report = open(os.path.join(tmp_path, "report.md")).read()
  assert "guRNN₁ (modReLU, phases init, λ: RMSProp)" in report, report


def test_seeds_differ(smoke_run):
  _, _, recs = smoke_run
  finals = [r["val_loss"] for r in recs if r["kind"] == "final" and r["model"] == "gurnn"]
  assert len(finals) == 2 and finals[0] != finals[1]


def test_resume_continues_where_it_stopped(smoke_run, tmp_path):
  config, _, recs = smoke_run
  config = rnn_configs.get_config("smoke")
  config.model = "gurnn"
  workdir = str(tmp_path)
  config.num_updates = 40          # "killed" after 40 updates (the checkpoint is at 40)
  rnn_training.train_and_evaluate(config, workdir, printer=lambda *_: None)
  config.num_updates = 60          # rerun: resumes from update 40
  lines = []
  rnn_training.train_and_evaluate(config, workdir, printer=lines.append)
  assert any("resumed at update 40" in l for l in lines), lines
  resumed = records.read_records(os.path.join(workdir, "results.jsonl"))
  val = [(r["seed"], r["update"]) for r in resumed if r["kind"] == "val"]
  assert len(val) == len(set(val)) == 2 * 4       # no duplicates, nothing missing
  # Identical to the uninterrupted run.
  ref = {(r["seed"], r["update"]): r["val_loss"] for r in recs
         if r["model"] == "gurnn" and r["kind"] == "val"}
  for r in resumed:
    if r["kind"] == "val":
      np.testing.assert_allclose(r["val_loss"], ref[(r["seed"], r["update"])], rtol=1e-5)
  # A third run finds everything finished and skips it.
  lines = []
  rnn_training.train_and_evaluate(config, workdir, printer=lines.append)
  assert any("skipped" in l for l in lines), lines


def test_hparams_follow_the_paper():
  memory = rnn_configs.get_config("memory")
  adding = rnn_configs.get_config("adding")
  hp = rnn_training.resolve_hparams(memory, "gurnn_beta", 100)
  assert (hp.beta, hp.activation, hp.hidden_size, hp.clip_value, hp.learning_rate) == (
      1.05, "tanh", 30, 0.0, 1e-3)
  hp = rnn_training.resolve_hparams(adding, "gurnn_beta", 100)
  assert (hp.beta, hp.activation) == (1.4, "relu")
  assert rnn_training.resolve_hparams(adding, "gurnn", 100).beta == 1.0
  assert rnn_training.resolve_hparams(adding, "urnn", 100).hidden_size == 512
  assert rnn_training.resolve_hparams(memory, "urnn", 100).hidden_size == 128
  irnn = rnn_training.resolve_hparams(adding, "irnn", 100)
  assert (irnn.learning_rate, irnn.clip_value) == (1e-4, 1.0)
  assert rnn_training.resolve_hparams(adding, "lstm", 100).clip_value == 1.0
  for variant in ("adding", "memory", "copy_long", "adding_long", "smoke"):
    assert rnn_training.units(rnn_configs.get_config(variant))
  assert [u.T for u in rnn_training.units(rnn_configs.get_config("copy_long"))] == [1000, 2000]
  with pytest.raises(ValueError, match="unknown model"):
    rnn_training.resolve_hparams(adding, "gru", 100)
  with pytest.raises(ValueError, match="variant"):
    rnn_configs.get_config("huge")


@pytest.mark.parametrize("lambda_optimizer", ["rmsprop", "sgd"])
def test_lambda_optimizer(lambda_optimizer):
  config = rnn_configs.get_config("adding")
  config.lambda_optimizer = lambda_optimizer
  hp = rnn_training.resolve_hparams(config, "gurnn", 100)
  opt = rnn_training.make_optimizer(hp)
  params = {"cell": {"lam": jnp.ones(4), "v": jnp.ones(3)}}
  grads = {"cell": {"lam": jnp.full(4, 0.5), "v": jnp.full(3, 0.5)}}
  updates, _ = opt.update(grads, opt.init(params), params)
  rms = optax.rmsprop(1e-3, decay=0.9, eps=1e-10, initial_scale=1.0)
  ref, _ = rms.update(grads, rms.init(params), params)
  np.testing.assert_allclose(updates["cell"]["v"], ref["cell"]["v"])
  expected = -1e-3 * 0.5 if lambda_optimizer == "sgd" else ref["cell"]["lam"]
  np.testing.assert_allclose(updates["cell"]["lam"], expected, rtol=1e-6)
  # Its own learning rate: λ's step scales with it, the rest's does not.
  config.lambda_learning_rate = 1e-5
  opt = rnn_training.make_optimizer(rnn_training.resolve_hparams(config, "gurnn", 100))
  updates, _ = opt.update(grads, opt.init(params), params)
  np.testing.assert_allclose(updates["cell"]["v"], ref["cell"]["v"])
  np.testing.assert_allclose(updates["cell"]["lam"], np.asarray(expected) / 100, rtol=1e-5)
  config.lambda_init = "uniform"
  with pytest.raises(ValueError, match="lambda_init"):
    rnn_training.resolve_hparams(config, "gurnn", 100)


def test_lr_drops_scale_every_update_after_them():
  # Factor 0 from update 1 on: three updates leave the parameters where one left them.
  config = rnn_configs.get_config("smoke")
  hp = rnn_training.resolve_hparams(config, "gurnn", 10)
  config.lr_drops, config.lr_drop_factor = "1", 0.0
  dropped = rnn_training.resolve_hparams(config, "gurnn", 10)
  assert dropped.lr_drops == (1,)
  keys = rnn_training._seed_keys(hp)
  run = lambda h, num: rnn_training.make_experiment(h).train_chunk(
      rnn_training.make_experiment(h).init(keys), keys, 0, num)[0].params
  one, three, three_dropped = run(hp, 1), run(hp, 3), run(dropped, 3)
  for a, b, c in zip(*map(jax.tree.leaves, (one, three_dropped, three))):
    np.testing.assert_array_equal(a, b)
  assert not np.allclose(jax.tree.leaves(one)[0], jax.tree.leaves(three)[0])


def test_clipping_by_value_for_lstm():
  hp = rnn_training.resolve_hparams(rnn_configs.get_config("adding"), "lstm", 100)
  opt = rnn_training.make_optimizer(hp)
  params = {"w": jnp.zeros(2)}
  updates, _ = opt.update({"w": jnp.array([100.0, -0.5])}, opt.init(params), params)
  rms = optax.rmsprop(1e-3, decay=0.9, eps=1e-10, initial_scale=1.0)
  ref, _ = rms.update({"w": jnp.array([1.0, -0.5])}, rms.init(params), params)
  np.testing.assert_allclose(updates["w"], ref["w"], rtol=1e-6)


def test_report_and_script(smoke_run):
  _, workdir, _ = smoke_run
  paths = rnn_report.write_report(workdir)
  assert os.path.exists(os.path.join(workdir, "figure3_adding_T10.png"))
  table = open(paths[0], encoding="utf-8").read()
  for label in ("guRNN₁", "guRNN_β", "ruRNN", "LSTM", "IRNN", "tanh RNN"):
    assert f"| {label} | 2 |" in table, table
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = subprocess.run(
      [sys.executable, os.path.join(root, "scripts", "train_rnn.py"), f"--workdir={workdir}",
       "--report_only"], capture_output=True, text=True, cwd=root,
      env={**os.environ, "PYTHONPATH": root, "JAX_PLATFORMS": "cpu"}, check=True)
  assert "report.md" in out.stdout


def test_a_worker_skips_units_claimed_by_another(tmp_path, monkeypatch):
  # Simulates worker 1 of 2 (lie_unitary.workers) after worker 0 claimed the LSTM.
  claims = tmp_path / "claims"
  claims.mkdir()
  (claims / "adding_T10_lstm_sgd").touch()
  monkeypatch.setenv("LIE_UNITARY_WORKER", "1/2")
  monkeypatch.setenv("LIE_UNITARY_CLAIMS_DIR", str(claims))
  config = rnn_configs.get_config("smoke")
  config.model, config.num_updates, config.num_seeds = "lstm,tanh", 20, 1
  lines = []
  rnn_training.train_and_evaluate(config, str(tmp_path / "w"), printer=lines.append)
  assert any(l.startswith("[worker 1/2]") and "lstm" in l and "taken by another worker" in l
             for l in lines), lines
  recs = records.read_records(tmp_path / "w" / "results.jsonl")
  assert {r["model"] for r in recs} == {"tanh"}
  assert (claims / "adding_T10_tanh_sgd").exists()
