"""The RNN family on the shared runner: every model, records, identity, resume, stops,
config errors, optimizers, report and launcher (smoke sizes)."""

import contextlib
import math
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from lie_unitary import algebra
from lie_unitary.experiments import loop
from lie_unitary.experiments import optimizers
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import config as rnn_configs
from lie_unitary.experiments.rnn import data as rnn_data
from lie_unitary.experiments.rnn import experiment as rnn
from lie_unitary.experiments.rnn import report as rnn_report

import helpers
from idx_files import write_image_folder

# The guRNN (its own scan and reverse pass) and flax's LSTM (the generic nn.scan path);
# every model trains in tests/golden_rnn_test.py's all-model run.
SMOKE_MODELS = ("gurnn", "lstm")
quiet = lambda *_: None  # noqa: E731

pytestmark = pytest.mark.usefixtures("fast_compiles")


def _run(config, workdir, printer=quiet):
  return runner.train_and_evaluate(rnn, config, str(workdir), printer=printer,
                                   handle_signals=False)


def _smoke(*models, **fields):
  config = rnn_configs.get_config("rnn_smoke")
  config.model = models
  for k, v in fields.items():
    config[k] = v
  return config


def _init(spec, x_shape=(1, 3, 1)):
  """The model's variables from key(0), initialised as one compiled program."""
  return jax.jit(rnn.make_model(spec).init)(jax.random.key(0), jnp.zeros(x_shape))


_diagnostics = jax.jit(rnn.diagnostics, static_argnums=0)  # a spec is hashable


def _records(workdir):
  return workdir_lib.read(workdir)


def _losses(recs, model="gurnn"):
  """{(kind, replicate, step): (val_loss, train_loss or test_loss)} of one model."""
  return {(r["kind"], r["replicate"], r["step"]): (r["val_loss"], r.get("train_loss"),
                                                   r.get("test_loss"))
          for r in recs if r["model"] == model}


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("smoke"))
  config = _smoke(*SMOKE_MODELS)
  _run(config, workdir)
  return config, workdir, _records(workdir)


@pytest.mark.slow
@pytest.mark.parametrize("model", SMOKE_MODELS)
def test_smoke_loss_finite_and_decreasing(smoke_run, model):
  config, _, recs = smoke_run
  mine = [r for r in recs if r["model"] == model]
  for replicate in range(config.num_replicates):
    val = {r["step"]: r["val_loss"] for r in mine
           if r["kind"] == "val" and r["replicate"] == replicate}
    assert sorted(val) == [0, 20, 40, 60]
    assert all(np.isfinite(v) for v in val.values())
    assert val[60] < val[0], val
    train = {r["step"]: r["train_loss"] for r in mine
             if r["kind"] == "val" and r["replicate"] == replicate and r["step"] > 0}
    assert train[60] < train[20], train
    final = [r for r in mine if r["kind"] == "final" and r["replicate"] == replicate]
    assert len(final) == 1 and final[0]["step"] == 60
    assert np.isfinite(final[0]["test_loss"]) and np.isfinite(final[0]["val_loss"])
    # The shared vocabulary, and the unit's resolved fields.
    rec = final[0]
    assert rec["unit"].startswith(rec["unit_name"]) and rec["unit_name"] == f"adding T=10 {model}"
    assert ((rec["T"], rec["task"], rec["hidden_size"], rec["num_replicates"])
            == (10, "adding", 8, 2))
    assert "num_updates" not in rec and "seed" in rec and "update" not in rec
    assert ("lambda_optimizer" in rec) == (model in ("gurnn", "gurnn_beta"))
  # The drift and λ's spectrum: models with a recurrent matrix of their own only.
  val = [r for r in mine if r["kind"] == "val"]
  assert all(("u_drift" in r) == ("theta_spread" in r) == (model == "gurnn") for r in val)


@pytest.mark.slow
def test_smoke_copy_long_setting(tmp_path):
  # The copy_long recipe (modReLU, diagonal phases, its own λ learning rate) at smoke size.
  long = rnn_configs.get_config("copy_long")
  config = _smoke("gurnn", num_replicates=1)
  for field in ("lambda_init", "lambda_optimizer", "h0"):
    config[field] = long[field]
  for field in ("activation", "lambda_learning_rate"):
    config.models.gurnn[field] = long.models.gurnn[field]
  _run(config, tmp_path)
  recs = _records(tmp_path)
  val = {r["step"]: r["val_loss"] for r in recs if r["kind"] == "val"}
  assert recs[-1]["activation"] == "modrelu" and recs[-1]["lambda_init"] == "phases"
  assert recs[-1]["lambda_learning_rate"] == 2e-5
  assert all(np.isfinite(v) for v in val.values()) and val[60] < val[0], val
  # The report names the setting, not just the model.
  rnn_report.write_report(str(tmp_path))
  report = open(os.path.join(tmp_path, "report.md"), encoding="utf-8").read()
  assert "guRNN₁ (modReLU, phases init, λ: RMSProp)" in report, report


@pytest.mark.slow
def test_replicates_differ(smoke_run):
  _, _, recs = smoke_run
  finals = [r["val_loss"] for r in recs if r["kind"] == "final" and r["model"] == "gurnn"]
  assert len(finals) == 2 and finals[0] != finals[1]


@pytest.mark.slow
def test_extending_resumes_from_the_checkpoint_and_an_identical_rerun_skips(smoke_run,
                                                                              tmp_path):
  _, _, recs = smoke_run
  _run(_smoke("gurnn", num_updates=40), tmp_path)     # a unit finished at update 40
  lines = []
  _run(_smoke("gurnn", num_updates=60), tmp_path, lines.append)  # extended to 60
  assert any("resumed at step 40" in l for l in lines), lines
  got = _losses(_records(tmp_path))
  val = [k for k in got if k[0] == "val"]
  assert len(val) == len(set(val)) == 2 * 4       # no duplicates, nothing missing
  # Identical to the uninterrupted run (the same unit: num_updates is not in its id).
  ref = _losses(recs)
  assert {r["unit"] for r in _records(tmp_path)} == {
      r["unit"] for r in recs if r["model"] == "gurnn"}
  for key, value in got.items():
    if key[0] == "val" or key[2] == 60:
      assert value == ref[key], key
  # The results hold the unit's final records at its current target only (the ones
  # written at update 40 are not its results any more).
  finals = [r for r in workdir_lib.load_results(str(tmp_path), as_frame=False)
            if r["kind"] == "final"]
  assert sorted((r["step"], r["replicate"]) for r in finals) == [(60, 0), (60, 1)]
  assert len([r for r in _records(tmp_path) if r["kind"] == "final"]) == 4  # on disk: both
  lines = []
  _run(_smoke("gurnn", num_updates=60), tmp_path, lines.append)
  assert any("already done, skipped" in l for l in lines), lines
  # Going back below the checkpoint is refused, not silently wrong.
  with pytest.raises(runner.ConfigError, match="beyond num_updates = 20"):
    _run(_smoke("gurnn", num_updates=20), tmp_path)


@pytest.mark.slow
def test_a_changed_learning_rate_is_a_new_unit(tmp_path):
  config = _smoke("tanh", num_updates=20)
  _run(config, tmp_path)
  config.models.tanh.learning_rate = 5e-3
  lines = []
  _run(config, tmp_path, lines.append)
  assert not any("resumed" in l or "skipped" in l for l in lines), lines
  recs = _records(tmp_path)
  units = {r["unit"]: r["learning_rate"] for r in recs}
  assert sorted(units.values()) == [5e-3, 1e-2]
  for unit in units:   # each computed from step 0, into its own checkpoint folder
    assert sorted({r["step"] for r in recs if r["unit"] == unit and r["kind"] == "val"}) == [0, 20]
  assert len(os.listdir(tmp_path / "checkpoints")) == 2


@pytest.mark.slow
def test_a_checkpoint_of_other_code_is_refused_unless_the_launch_says_so(tmp_path, monkeypatch):
  _run(_smoke("tanh", num_updates=20), tmp_path)
  this = workdir_lib.code_fingerprint()
  monkeypatch.setattr(workdir_lib, "code_fingerprint",
                      lambda: {**this, "versions": {**this["versions"], "optax": "0.0.0"}})
  with pytest.raises(runner.ConfigError, match="step 20 was written by other code .*→ 0.0.0"):
    _run(_smoke("tanh", num_updates=30), tmp_path)
  lines = []
  runner.train_and_evaluate(rnn, _smoke("tanh", num_updates=30), str(tmp_path),
                            printer=lines.append, handle_signals=False,
                            resume_across_code_change=True)
  assert any("resuming at step 20 across a code change (optax" in l for l in lines), lines
  assert max(r["step"] for r in _records(tmp_path)) == 30


@pytest.mark.slow
def test_a_graceful_stop_checkpoints_and_resumes_to_the_same_numbers(smoke_run, tmp_path):
  _, _, recs = smoke_run
  config = _smoke("gurnn")
  stop = loop.StopRequest()
  stop.request("SIGINT")  # as if Ctrl-C came during the first call (one update)
  lines = []
  summary = runner.train_and_evaluate(rnn, config, str(tmp_path), printer=lines.append,
                                      stop=stop)
  assert summary.computed == 0 and summary.stopped_by == "SIGINT"
  assert any("stopped at a checkpoint" in l for l in lines), lines
  (folder,) = os.listdir(tmp_path / "checkpoints")
  assert "1" in os.listdir(tmp_path / "checkpoints" / folder)
  assert max(r["step"] for r in _records(tmp_path)) == 0
  lines = []
  assert not _run(config, tmp_path, lines.append).stopped_by
  assert any("resumed at step 1" in l for l in lines), lines
  assert _losses(_records(tmp_path)) == _losses(recs)


def test_config_errors_before_the_workdir_exists(tmp_path):
  workdir = tmp_path / "w"
  config = _smoke("gurnn")
  with config.unlocked():
    config.learning_rate = 1e-3          # was a shared field: now per model
  with pytest.raises(runner.ConfigError, match="no field 'learning_rate'"):
    _run(config, workdir)
  config = _smoke("gurnn")
  with config.models.unlocked():
    config.models.gurnn.dropout = 0.5
  with pytest.raises(runner.ConfigError, match=r"no field 'models\.gurnn\.dropout'"):
    _run(config, workdir)
  bad = [("model", ("gru",), "model"), ("model", ("gurnn,lstm",), "--config.model=gurnn"),
         ("T", (1,), "integers ≥ 2"), ("lambda_optimizer", "adam", "'sgd', 'rmsprop'"),
         ("eval_size", 50, "multiple of eval_batch_size"), ("lr_drops", (-1,), "lr_drops"),
         ("num_replicates", 0, "num_replicates"),
         ("param_budget", "16k", "sizes the image tasks' models")]  # ignored before
  for field, value, match in bad:
    config = _smoke("gurnn")
    config[field] = value
    with pytest.raises(runner.ConfigError, match=match):
      _run(config, workdir)
  config = _smoke("gurnn")
  config.models.gurnn.activation = "gelu"
  with pytest.raises(runner.ConfigError, match=r"models\.gurnn\.activation.*'modrelu'"):
    _run(config, workdir)
  assert not workdir.exists()


def test_the_per_model_table_follows_the_paper(tmp_path):
  memory, adding = rnn_configs.get_config("memory"), rnn_configs.get_config("adding")
  spec = rnn.make_unit(memory, "gurnn_beta", 100, 0).spec
  assert (spec.beta, spec.activation, spec.hidden_size, spec.clip_value, spec.learning_rate,
          spec.task) == (1.05, "tanh", 30, 0.0, 1e-3, "memory")
  assert (rnn.make_unit(adding, "gurnn_beta", 100, 0).spec.beta,
          rnn.make_unit(adding, "gurnn_beta", 100, 0).spec.activation) == (1.4, "relu")
  assert rnn.make_unit(adding, "gurnn", 100, 0).spec.beta == 1.0
  assert rnn.make_unit(adding, "free", 100, 0).spec.beta == 1.4
  assert rnn.make_unit(adding, "urnn", 100, 0).spec.hidden_size == 512
  assert rnn.make_unit(memory, "urnn", 100, 0).spec.hidden_size == 128
  irnn = rnn.make_unit(adding, "irnn", 100, 0).spec
  assert (irnn.learning_rate, irnn.clip_value) == (1e-4, 1.0)
  assert rnn.make_unit(adding, "lstm", 100, 0).spec.clip_value == 1.0
  assert "beta" not in rnn.make_unit(adding, "lstm", 100, 0).fields
  for variant in rnn_configs.NAMED_CONFIGS:
    config = rnn_configs.get_config(variant)
    if config.task in ("pixel", "permuted"):  # their files: a small folder written here
      config.dataset = write_image_folder(tmp_path / "idx")  # 256 + 64 images of 4 × 4
      config.T, config.num_validation, config.batch_size, config.eval_batch_size = (16,), 64, 32, 32
    rnn.validate_config(config)
    assert rnn.units(config)
  copy = rnn.units(rnn_configs.get_config("copy_long"))
  assert [u.spec.T for u in copy] == [1000, 2000]
  assert (copy[0].spec.hidden_size, copy[0].spec.activation, copy[0].spec.learning_rate,
          copy[0].spec.lambda_learning_rate) == (64, "modrelu", 2e-4, 2e-5)
  assert rnn.units(rnn_configs.get_config("adding_long"))[0].spec.lr_drops == (45_000, 65_000)
  with pytest.raises(ValueError, match="unknown rnn config 'huge'"):
    rnn_configs.get_config("huge")


@pytest.mark.parametrize("name,task,match", [
    ("adding", "memory", r"'adding': config\.models is `paper_models\('adding'\)`, unchanged; "
     r"load --config=memory"),
    ("adding", "copy", r"load --config=memory"),
    ("memory", "adding", r"`paper_models\('memory'\)`, unchanged; load --config=adding"),
    ("adding", "permuted", r"'adding' or 'memory': config\.models is the paper's table"),
    ("permuted_mnist", "adding", r"an image task .*the image tasks' table"),
])
def test_a_models_table_made_for_another_task_is_refused(name, task, match):
  config = rnn_configs.get_config(name)
  config.task = task  # --config=NAME --config.task=TASK: NAME's β, activation, sizes
  with pytest.raises(runner.ConfigError, match=match):
    rnn.validate_config(config)
  config = rnn_configs.get_config("rnn_smoke")  # a table changed by hand is the user's
  config.task = "memory"
  rnn.validate_config(config)


@pytest.mark.parametrize("lambda_optimizer", ["rmsprop", "sgd"])
def test_lambda_optimizer(lambda_optimizer):
  config = rnn_configs.get_config("adding")
  config.lambda_optimizer = lambda_optimizer
  opt = rnn.optimizer_for(rnn.make_unit(config, "gurnn", 100, 0).spec)
  params = {"cell": {"lam": jnp.ones(4), "v": jnp.ones(3)}}
  grads = {"cell": {"lam": jnp.full(4, 0.5), "v": jnp.full(3, 0.5)}}
  updates, _ = opt.update(grads, opt.init(params), params)
  rms = optax.rmsprop(1e-3, decay=0.9, eps=1e-10, initial_scale=1.0)
  ref, _ = rms.update(grads, rms.init(params), params)
  np.testing.assert_allclose(updates["cell"]["v"], ref["cell"]["v"])
  expected = -1e-3 * 0.5 if lambda_optimizer == "sgd" else ref["cell"]["lam"]
  np.testing.assert_allclose(updates["cell"]["lam"], expected, rtol=1e-6)
  # Its own learning rate: λ's step scales with it, the rest's does not.
  config.models.gurnn.lambda_learning_rate = 1e-5
  opt = rnn.optimizer_for(rnn.make_unit(config, "gurnn", 100, 0).spec)
  updates, _ = opt.update(grads, opt.init(params), params)
  np.testing.assert_allclose(updates["cell"]["v"], ref["cell"]["v"])
  np.testing.assert_allclose(updates["cell"]["lam"], np.asarray(expected) / 100, rtol=1e-5)


@pytest.mark.parametrize("eps_in_sqrt", [True, False])
def test_rmsprop_eps_under_or_outside_the_root(eps_in_sqrt):
  # Two updates from a zero mean square, against the formulas written out: TensorFlow's
  # g / sqrt(ν + ε) or PyTorch's g / (sqrt(ν) + ε). Gradients of 1e-5 and 1e-3 with
  # ε = 1e-8: under the root ε floors the denominator at 1e-4, outside at 1e-8.
  config = rnn_configs.get_config("adding")
  config.rmsprop_eps, config.rmsprop_initial_scale, config.rmsprop_decay = 1e-8, 0.0, 0.99
  config.rmsprop_eps_in_sqrt = eps_in_sqrt
  spec = rnn.make_unit(config, "lstm", 100, 0).spec
  assert spec.rmsprop_eps_in_sqrt == eps_in_sqrt  # part of every unit's identity
  opt = rnn.optimizer_for(spec)
  g = np.array([1e-5, -1e-3])
  params = {"w": jnp.zeros(2)}
  state, nu = opt.init(params), np.zeros(2)
  for _ in range(2):
    updates, state = opt.update({"w": jnp.asarray(g, jnp.float32)}, state, params)
    nu = 0.99 * nu + 0.01 * g**2
    denominator = np.sqrt(nu + 1e-8) if eps_in_sqrt else np.sqrt(nu) + 1e-8
    np.testing.assert_allclose(updates["w"], -1e-3 * g / denominator, rtol=1e-5)
  assert (abs(float(updates["w"][0])) < 1e-3 * 0.2) == eps_in_sqrt


# The image configs' own π/2, and the defaults' full circle set over them.
@pytest.mark.parametrize("name,override,phase_range", [("permuted_mnist", None, 1.5708),
                                                       ("pixel_mnist", None, 1.5708),
                                                       ("permuted_mnist", math.pi, math.pi)])
def test_phases_init_draws_its_phases_within_the_range(name, override, phase_range):
  config = rnn_configs.get_config(name)
  if override is not None:
    config.lambda_phase_range = override
  assert config.lambda_phase_range == phase_range
  spec = rnn.make_unit(config, "gurnn", 784, 0).spec
  assert spec.lambda_phase_range == phase_range  # part of the guRNN's identity
  n = spec.hidden_size
  lam = rnn.make_model(spec).cell.lambda_init(jax.random.key(3), (n * n,))
  theta = np.asarray(lam[:n])
  np.testing.assert_array_equal(np.asarray(lam[n:]), 0.0)  # U = diag(e^{iθ})
  assert np.all(np.abs(theta) < phase_range)
  # n = 116 uniform draws fill the range: the widest phase is near its end.
  assert np.max(np.abs(theta)) > 0.9 * phase_range
  assert "lambda_phase_range" not in rnn.make_unit(config, "orthogonal", 784, 0).fields


def test_phase_range_must_be_positive():
  config = rnn_configs.get_config("permuted_mnist")
  config.lambda_phase_range = 0.0
  with pytest.raises(ValueError, match="lambda_phase_range"):
    rnn.validate_config(config)


def test_the_launchers_help_names_every_named_config():
  import importlib
  text = importlib.import_module("lie_unitary.experiments.rnn.__main__").__doc__
  for name in rnn_configs.NAMED_CONFIGS:
    assert name in text, name


def test_lr_drops_scale_the_update_with_index_d_and_later():
  # RMSProp's steps under drops at updates 1 and 3 (factor 0.5) against the same
  # optimizer without drops: optax counts the updates made before the current one.
  def steps(**fields):
    config = _smoke("tanh", **fields)
    rnn.validate_config(config)
    opt = rnn.optimizer_for(rnn.units(config)[0].spec)
    params = {"w": jnp.zeros(1)}
    state, out = opt.init(params), []
    for _ in range(5):
      updates, state = opt.update({"w": jnp.ones(1)}, state, params)
      out.append(float(updates["w"][0]))
    return np.array(out)
  ratio = steps(lr_drops=(1, 3), lr_drop_factor=0.5) / steps()
  np.testing.assert_allclose(ratio, [1.0, 0.5, 0.5, 0.25, 0.25], rtol=1e-6)

def test_an_unknown_optimizer_is_refused():
  with pytest.raises(ValueError, match="unknown optimizer"):
    optimizers.make_optimizer("adam", 1e-3)


def test_lr_drops_scale_every_update_after_them():
  # Factor 0 from update 1 on: three updates leave the parameters where one left them.
  config = _smoke("gurnn")
  plain = rnn.make_unit(config, "gurnn", 10, 0).spec
  config.lr_drops, config.lr_drop_factor = (1,), 0.0
  dropped = rnn.make_unit(config, "gurnn", 10, 0).spec
  ids = jnp.arange(2, dtype=jnp.int32)

  def run(spec, num):
    exp = rnn.make_experiment(spec, replicas_lib.replicate_sharding())  # smoke_run's
    return exp.train_chunk(exp.init(ids), ids, 0, num, None, None)[0].params

  one, three, three_dropped = run(plain, 1), run(plain, 3), run(dropped, 3)
  for a, b in zip(jax.tree.leaves(one), jax.tree.leaves(three_dropped)):
    np.testing.assert_array_equal(a, b)
  assert not np.allclose(jax.tree.leaves(one)[0], jax.tree.leaves(three)[0])


def test_clipping_by_value_for_lstm():
  adding = rnn_configs.get_config("adding")
  opt = rnn.optimizer_for(rnn.make_unit(adding, "lstm", 100, 0).spec)
  params = {"w": jnp.zeros(2)}
  updates, _ = opt.update({"w": jnp.array([100.0, -0.5])}, opt.init(params), params)
  rms = optax.rmsprop(1e-3, decay=0.9, eps=1e-10, initial_scale=1.0)
  ref, _ = rms.update({"w": jnp.array([1.0, -0.5])}, rms.init(params), params)
  np.testing.assert_allclose(updates["w"], ref["w"], rtol=1e-6)


def test_clipping_by_global_norm_scales_the_whole_gradient_first():
  opt = optimizers.make_optimizer("sgd", 1.0, clip_norm=2.0)
  params = {"a": jnp.zeros(2), "b": jnp.zeros(1)}
  grads = {"a": jnp.array([3.0, 4.0]), "b": jnp.array([12.0])}  # global norm 13
  updates, _ = opt.update(grads, opt.init(params), params)
  np.testing.assert_allclose(updates["a"], [-6 / 13, -8 / 13], rtol=1e-6)
  np.testing.assert_allclose(updates["b"], [-24 / 13], rtol=1e-6)
  small = {"a": jnp.array([0.3, 0.4]), "b": jnp.array([1.2])}  # norm 1.3 ≤ 2: unchanged
  updates, _ = opt.update(small, opt.init(params), params)
  np.testing.assert_allclose(updates["b"], [-1.2], rtol=1e-6)
  # By norm, then by value: the value clip sees the scaled entries (24/13 < 2.5).
  both = optimizers.make_optimizer("sgd", 1.0, clip_norm=2.0, clip_value=2.5)
  updates, _ = both.update(grads, both.init(params), params)
  np.testing.assert_allclose(updates["b"], [-24 / 13], rtol=1e-6)
  with pytest.raises(ValueError, match="clip_norm"):
    optimizers.make_optimizer("sgd", 1.0, clip_norm=-1.0)


def test_clip_norm_enters_the_identity_only_when_on_and_spares_the_orthogonal_mu():
  config = rnn_configs.get_config("pixel_mnist")
  config.param_budget = ""
  lstm = rnn.make_unit(config, "lstm", 784, 0).spec  # the image configs' LSTM
  assert (lstm.clip_norm, lstm.clip_value, lstm.lstm_forget_bias) == (1.0, 1.0, 1.0)
  assert "clip_norm" not in rnn.make_unit(config, "orthogonal", 784, 0).fields
  config.models.lstm.clip_norm = 0.0
  assert "clip_norm" not in rnn.make_unit(config, "lstm", 784, 0).fields
  config.models.orthogonal.clip_norm = 1.0
  assert rnn.make_unit(config, "orthogonal", 784, 0).spec.clip_norm == 1.0
  assert "clip_norm" not in rnn.make_unit(config, "gurnn", 784, 0).fields
  # The orthogonal RNN: the readout's gradient scaled to norm 1, μ's left alone. Two steps
  # of PyTorch's RMSProp (decay 0.99, ν from 0): the second sees the first's scale.
  opt = rnn.optimizer_for(rnn.make_unit(config, "orthogonal", 784, 0).spec)
  params = {"mu": jnp.zeros(1), "w": jnp.zeros(2)}
  state = opt.init(params)
  for g_w in ([3.0, 4.0], [0.3, 0.4]):  # norms 5 (scaled to 1) and 0.5 (kept)
    updates, state = opt.update({"mu": jnp.array([100.0]), "w": jnp.array(g_w)}, state,
                                params)
  lr, mu_lr = (config.models.orthogonal[k] for k in ("learning_rate", "lambda_learning_rate"))
  w1, w2 = np.array([0.6, 0.8]), np.array([0.3, 0.4])
  np.testing.assert_allclose(updates["w"], -lr * w2 / np.sqrt(0.0099 * w1**2 + 0.01 * w2**2),
                             rtol=1e-5)
  np.testing.assert_allclose(updates["mu"], [-mu_lr * 100 / np.sqrt(199.0)], rtol=1e-5)
  config.models.lstm.clip_norm = -1.0
  with pytest.raises(runner.ConfigError, match=r"models\.lstm\.clip_norm"):
    rnn.validate_config(config)


@pytest.mark.slow
def test_a_unit_claimed_by_another_process_is_skipped(tmp_path):
  config = _smoke("lstm", "tanh", num_updates=20)
  lines = []
  lstm = [u for u in rnn.units(config) if u.spec.model == "lstm"][0]
  with workdir_lib.claim(str(tmp_path), lstm.slug) as holder:  # held while the launch runs
    assert holder is None
    runner.train_and_evaluate(rnn, config, str(tmp_path), printer=lines.append)
  assert any("lstm" in l and f"running in process {os.getpid()} on" in l for l in lines), lines
  assert {r["model"] for r in _records(tmp_path)} == {"tanh"}


@pytest.mark.slow
def test_a_launch_whose_units_all_run_elsewhere_says_where_and_exits_0(tmp_path):
  config = _smoke("tanh", num_updates=20)
  config.seeds = (0, 1)
  units = rnn.units(config)
  with contextlib.ExitStack() as held:  # another process holds every unit
    assert all(held.enter_context(workdir_lib.claim(str(tmp_path), u.slug)) is None
               for u in units)
    out = helpers.launcher("rnn", "--config=rnn_smoke", "--config.model=tanh",
                           "--config.num_updates=20", "--config.seeds=0,1",
                           f"--workdir={tmp_path}", cwd=tmp_path)
  assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
  for seed in (0, 1):
    assert (f"adding T=10 tanh seed={seed}: running in process {os.getpid()} on "
            in out.stdout), out.stdout
  assert "2 unit(s) still running in other processes" in out.stdout
  assert not (tmp_path / "report.md").exists()  # no records yet: no report


@pytest.mark.slow
def test_report_and_launcher(smoke_run, tmp_path):
  _, workdir, _ = smoke_run
  paths = rnn_report.write_report(workdir)
  assert os.path.exists(os.path.join(workdir, "figure3_adding_T10.png"))
  table = open(paths[0], encoding="utf-8").read()
  for label in ("guRNN₁", "LSTM"):
    assert f"| {label} | — | 0 | 2 |" in table, table
  out = subprocess.run(
      [sys.executable, os.path.join(helpers.ROOT, "scripts", "train_rnn.py"),
       f"--workdir={workdir}", "--report_only"], capture_output=True, text=True,
      cwd=helpers.ROOT, env={**os.environ, "PYTHONPATH": helpers.ROOT, "JAX_PLATFORMS": "cpu"},
      check=True)
  assert "report.md" in out.stdout
  # A bad config value, a flag that does not parse, a workdir without rnn results:
  # one line each, no traceback, nothing written.
  for args, match in (
      (["--config=rnn_smoke", "--config.models.gurnn.activation=gelu"], "models.gurnn.activation"),
      (["--config=rnn_smoke", "--config.num_updates=many"], "num_updates"),
      (["--config=rnn_smoke", "--config.num_update=50"],
       "no field 'num_update' (did you mean 'num_updates'?)"),
      (["--config=rnn_smoke", "--config.models.gurnn.hiden_size=3"],
       "no field 'models.gurnn.hiden_size' (did you mean 'models.gurnn.hidden_size'?)"),
      (["--config=rnn_smoke", "--config.model=gurnn", "--config.model=lstm"],
       "--config.model is given more than once"),
      (["--report_only"], "no such folder"),
      (["--report_only", "--config=rnn_smoke"], "drop --config")):
    out = helpers.launcher("rnn", *args, f"--workdir={tmp_path / 'w'}", cwd=tmp_path)
    assert out.returncode != 0 and out.stdout == "", out
    assert len(out.stderr.strip().splitlines()) == 1 and match in out.stderr, out.stderr
  assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("model,fan_in", [("orthogonal", 170), ("gurnn", 2 * 116), ("lstm", 62)])
def test_torch_readout_init_draws_within_pytorch_linears_bound(model, fan_in):
  config = rnn_configs.get_config("permuted_mnist")
  config.readout_init = "lecun_normal"  # the field's default: outside the identity
  assert "readout_init" not in rnn.make_unit(config, model, 784, 0).fields
  config.readout_init = "torch"  # the image configs'
  assert config == rnn_configs.get_config("permuted_mnist")
  spec = rnn.make_unit(config, model, 784, 0).spec
  assert spec.readout_init == "torch"
  params = _init(spec)
  kernel, bias = (np.asarray(params["params"]["readout"][k]) for k in ("kernel", "bias"))
  bound = 1 / math.sqrt(fan_in)  # PyTorch's nn.Linear: U(±1/√fan_in), kernel and bias
  assert kernel.shape == (fan_in, 10)
  assert np.all(np.abs(kernel) <= bound) and np.max(np.abs(kernel)) > 0.95 * bound
  assert np.all(np.abs(bias) <= bound) and np.all(bias != 0)
  np.testing.assert_allclose(kernel.std(), bound / math.sqrt(3), rtol=0.1)


def test_lstm_forget_bias_sets_the_forget_gates_bias_only():
  config = rnn_configs.get_config("adding")
  config.models.lstm.hidden_size, config.num_replicates = 5, 2
  plain = rnn.make_unit(config, "lstm", 10, 0).spec
  # The default 0: older units keep their identity.
  assert "lstm_forget_bias" not in rnn.make_unit(config, "lstm", 10, 0).fields
  config.lstm_forget_bias = 1.0
  assert "lstm_forget_bias" not in rnn.make_unit(config, "gurnn", 10, 0).fields
  spec = rnn.make_unit(config, "lstm", 10, 0).spec
  assert spec.lstm_forget_bias == 1.0
  replicates = jnp.arange(2)
  base, biased = (rnn.make_experiment(s).init(replicates).params["params"]["cell"]
                  for s in (plain, spec))
  np.testing.assert_array_equal(base["hf"]["bias"], np.zeros((2, 5)))  # flax's zeros
  np.testing.assert_array_equal(biased["hf"]["bias"], np.ones((2, 5)))
  del base["hf"]["bias"], biased["hf"]["bias"]
  jax.tree.map(np.testing.assert_array_equal, base, biased)  # the rest drawn alike
  config.lstm_forget_bias = -1.0
  with pytest.raises(ValueError, match="lstm_forget_bias"):
    rnn.validate_config(config)


def test_complex_product_enters_a_unit_as_resolved():
  config = rnn_configs.get_config("permuted_mnist")
  # 'auto' resolves to 'real' at 16K (116 units): older units keep their identity.
  assert rnn.make_unit(config, "gurnn", 784, 0).spec.complex_product == "real"
  assert "complex_product" not in rnn.make_unit(config, "gurnn", 784, 0).fields
  config.param_budget = "69k"  # 250 units: Gauss's product on CPU, in the id
  resolved = rnn.make_unit(config, "gurnn", 784, 0)
  expected = "gauss" if jax.default_backend() == "cpu" else "real"
  assert resolved.spec.complex_product == expected
  assert resolved.fields.get("complex_product", "real") == expected
  config.complex_product = "gauss"
  assert rnn.make_unit(config, "gurnn", 784, 0).fields["complex_product"] == "gauss"
  assert "complex_product" not in rnn.make_unit(config, "orthogonal", 784, 0).fields
  config.complex_product = "complex"
  with pytest.raises(ValueError, match="complex_product"):
    rnn.validate_config(config)


def test_readout_init_must_be_known():
  config = rnn_configs.get_config("permuted_mnist")
  config.readout_init = "kaiming"
  with pytest.raises(ValueError, match="readout_init"):
    rnn.validate_config(config)


def test_orthogonal_expm_enters_the_identity_only_when_not_eigh():
  config = rnn_configs.get_config("pixel_mnist")
  config.models.orthogonal.hidden_size = 8
  config.param_budget = ""
  eigh = rnn.make_unit(config, "orthogonal", 784, 0).spec
  assert "orthogonal_expm" not in rnn.make_unit(config, "orthogonal", 784, 0).fields
  config.orthogonal_expm = "pade"
  assert "orthogonal_expm" not in rnn.make_unit(config, "gurnn", 784, 0).fields
  pade = rnn.make_unit(config, "orthogonal", 784, 0).spec
  assert pade.orthogonal_expm == "pade"
  models = [rnn.make_model(s) for s in (eigh, pade)]
  assert [m.cell.expm_method for m in models] == ["eigh", "pade"]
  x = jax.random.uniform(jax.random.key(1), (2, 30, 1))
  params = _init(eigh, x.shape)
  # Two exponentials of the same A(μ): eigh's and jax.scipy.linalg.expm's (Padé).
  outputs = jax.jit(lambda p, x: [m.apply(p, x) for m in models])(params, x)
  np.testing.assert_allclose(outputs[1], outputs[0], atol=1e-5)
  config.orthogonal_expm = "taylor"
  with pytest.raises(ValueError, match="orthogonal_expm"):
    rnn.validate_config(config)


@pytest.mark.parametrize("model", ["gurnn", "orthogonal"])
def test_the_drift_against_expm(model):
  config = rnn_configs.get_config("permuted_mnist")
  config.models[model].hidden_size = 4
  spec = rnn.make_unit(config, model, 784, 0).spec
  variables = _init(spec)
  key = "lam" if model == "gurnn" else "mu"
  to_algebra = (algebra.lambdas_to_skew_hermitian if model == "gurnn"
                else algebra.lambdas_to_skew_symmetric)
  coefficients = variables["params"]["cell"][key]
  # Copies at λ (μ) = 0 and moved: the drift is ‖M − M₀‖_F / √n of the two exponentials.
  zero, moved = jax.tree.map(lambda a: a, variables), jax.tree.map(lambda a: a, variables)
  zero["params"]["cell"][key] = jnp.zeros_like(coefficients)
  moved["params"]["cell"][key] = coefficients + 0.3 * jnp.arange(coefficients.size) / 10
  exp_of = jax.jit(lambda v: jax.scipy.linalg.expm(to_algebra(v["params"]["cell"][key])))
  expm = lambda v: np.asarray(exp_of(v))
  for a, b in ((moved, variables), (variables, zero)):
    drift = np.sqrt(np.sum(np.abs(expm(a) - expm(b)) ** 2) / 4)
    assert drift > 0.05
    np.testing.assert_allclose(_diagnostics(spec, a, b)["u_drift"], drift, rtol=1e-5)
  assert _diagnostics(spec, variables, variables)["u_drift"] == 0


def test_the_drift_closed_forms():
  # The orthogonal RNN at n = 2: expm(A(μ)) turns the plane by μ, so from μ = 0 each
  # column moves by |e^{iμ} − 1| = 2 |sin(μ/2)|: 2 at μ = π (M = −M₀), 2 sin 0.35 at 0.7.
  config = rnn_configs.get_config("permuted_mnist")
  config.models.orthogonal.hidden_size, config.param_budget = 2, ""
  spec = rnn.make_unit(config, "orthogonal", 784, 0).spec
  variables = _init(spec)
  at = lambda mu: {**variables, "params": {**variables["params"], "cell": {
      **variables["params"]["cell"], "mu": jnp.array([mu], jnp.float32)}}}
  for mu, drift in ((np.pi, 2.0), (0.7, 2 * np.sin(0.35))):
    np.testing.assert_allclose(_diagnostics(spec, at(mu), at(0.0))["u_drift"], drift,
                               rtol=1e-5)


def test_the_drift_of_a_model_without_a_recurrent_matrix():
  spec = rnn.make_unit(rnn_configs.get_config("permuted_mnist"), "lstm", 784, 0).spec
  with pytest.raises(ValueError, match="'lstm' has no recurrent matrix"):
    rnn.diagnostics(spec, {}, {})


@pytest.mark.slow  # an end-to-end run; the drift's numbers are the tests above, quick
def test_image_records_carry_the_drift_and_the_spectrum(tmp_path):
  config = rnn_configs.get_config("permuted_mnist")
  config.dataset = write_image_folder(tmp_path / "idx")
  config.T, config.model, config.seeds = (16,), ("gurnn", "orthogonal"), (0,)
  config.num_validation, config.eval_batch_size, config.batch_size = 64, 32, 32
  config.num_updates, config.val_every, config.data_parallel = 12, 6, 1
  for m in config.models.values():
    m.hidden_size = 4
  _run(config, tmp_path / "w")
  val = {(r["model"], r["step"]): r for r in _records(tmp_path / "w") if r["kind"] == "val"}
  for model in ("gurnn", "orthogonal"):
    assert val[(model, 0)]["u_drift"] == 0.0
    assert 0 < val[(model, 6)]["u_drift"] < val[(model, 12)]["u_drift"] < 2
    # The last one against the checkpoint's matrix and the initial one, from expm.
    unit = workdir_lib.load_unit(str(tmp_path / "w"), f"permuted T=16 {model}")
    spec = rnn.make_unit(config, model, 16, 0).spec
    last = jax.tree.map(lambda a: jnp.asarray(a[0]), unit.state["params"])
    key = "lam" if model == "gurnn" else "mu"
    to_algebra = (algebra.lambdas_to_skew_hermitian if model == "gurnn"
                  else algebra.lambdas_to_skew_symmetric)
    source = rnn_data.image_source(spec, 256 - 64)  # the training images less validation
    initial = rnn.make_experiment(spec, replicas_lib.replicate_sharding(),
                                           source).init(jnp.arange(1))
    m = [jax.scipy.linalg.expm(to_algebra(jnp.asarray(p["params"]["cell"][key]).reshape(
        -1))) for p in (last, jax.tree.map(lambda a: a[0], initial.params))]
    np.testing.assert_allclose(val[(model, 12)]["u_drift"],
                               np.sqrt(np.sum(np.abs(np.asarray(m[0] - m[1])) ** 2) / 4),
                               rtol=1e-4)
  assert 0 < val[("gurnn", 12)]["theta_spread"] and "theta_spread" not in val[("orthogonal", 12)]
