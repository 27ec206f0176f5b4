"""End to end: the operators family through the runner (smoke config, n = 3).

A module-scoped smoke run writes records, launches and a report; a rerun skips;
rerunning with changed seed / noise / data size computes new units beside the old;
a stop request checkpoints and a resume gives the uninterrupted numbers; the same
run sharded over 4 forced host devices gives the same records (to float rounding);
bad configs fail before the workdir exists, naming the field.
"""

import ast
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import lie_unitary as lu
from lie_unitary import experiments
from lie_unitary.experiments import fields
from lie_unitary.experiments import loop
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.operators import config as cfg_lib
from lie_unitary.experiments.operators import experiment
from lie_unitary.experiments.operators import report

import helpers

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_QUIET = dict(printer=lambda *_: None, handle_signals=False)

pytestmark = pytest.mark.usefixtures("fast_compiles")


def _smoke(**changes):
  config = cfg_lib.get_config("operators_smoke")
  config.n_values = (3,)
  config.approaches = ("true", "rand", "lstsq", "lie_algebra")
  for k, v in changes.items():
    config[k] = v
  return config


def _finals(workdir):
  return [r for r in workdir_lib.read(workdir)
          if r["kind"] == "final"]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("smoke"))
  lines = []
  summary = experiment.train_and_evaluate(_smoke(), workdir, printer=lines.append,
                                          handle_signals=False)
  return workdir, summary, lines


@pytest.mark.slow
def test_smoke_writes_one_record_per_replicate_with_its_fields(smoke_run):
  workdir, summary, lines = smoke_run
  assert summary.computed == 2 and not summary.stopped_by  # baselines, lie_algebra
  assert sum("ETA" in line for line in lines) == 1  # not after the last unit
  recs = _finals(workdir)
  assert sorted((r["approach"], r["replicate"]) for r in recs) == sorted(
      (a, r) for a in ("true", "rand", "lstsq", "lie_algebra") for r in range(3))
  for r in recs:  # the unit's identity and every field that computed it
    for field in ("unit", "unit_name", "n", "approach", "generator", "replicate", "step",
                  "test_loss", "final_val_loss", "seconds", "seed", "noise_std", "num_train"):
      assert field in r, field
  assert [r["generator"] for r in recs if r["approach"] == "true"] == ["lie", "qr",
                                                                         "composition"]
  true = [r["test_loss"] for r in recs if r["approach"] == "true"]
  np.testing.assert_allclose(true, 6e-4, rtol=0.3)  # noise floor 2n·0.01², 500 pairs
  assert all(r["step"] == 100 for r in recs if r["approach"] == "lie_algebra")
  curves = workdir_lib.read(workdir, "curves.jsonl")
  assert len(curves) == 3 and all(len(c["val_loss"]) == 5 for c in curves)
  assert curves[0]["val_steps"] == [0, 25, 50, 75, 100]
  launch, = workdir_lib.read_launches(workdir)
  assert launch["family"] == "operators" and launch["config"]["seeds"] == [0]
  assert launch["provenance"]["versions"]["jax"] and launch["provenance"]["devices"]
  assert {u["name"] for u in launch["units"]} == {"n=3 baselines",
                                                   "n=3 lie_algebra epochs=1 lr=0.001"}


@pytest.mark.slow
def test_report_renders_tables_and_figure(smoke_run):
  workdir, _, _ = smoke_run
  paths = experiment.write_report(workdir)
  text = open(os.path.join(workdir, "report.md"), encoding="utf-8").read()
  assert "| 3 | 1 |" in text and "(12.5 ± 0.4)" in text and "lie_algebra" in text
  assert os.path.join(workdir, "figure2.png") in paths


@pytest.mark.slow
def test_trained_parameters_load_for_a_notebook(smoke_run):
  workdir, _, _ = smoke_run
  assert experiments.unit_names(workdir) == ["n=3 baselines seed=0",
                                             "n=3 lie_algebra epochs=1 lr=0.001 seed=0"]
  u = experiments.load_unit(workdir, "n=3 lie_algebra epochs=1 lr=0.001")
  assert u.finished and u.step == 100 and u.fields["seed"] == 0 and u.config["n_values"] == [3]
  lam = u.state["train"]["params"]["lam"]
  assert lam.shape == (3, 9)
  # The saved parameters reproduce the recorded test loss of replicate 0 (its own data).
  import jax

  from lie_unitary.experiments.operators import data as ol_data
  config = _smoke()
  t = ol_data.TaskSpec(n=3, generators=tuple(config.generators), num_train=config.num_train,
                  num_val=config.num_val, num_test=config.num_test)
  keys = ol_data.replicate_keys(jax.random.fold_in(jax.random.key(0), 3), 0)
  loss = ol_data.dataset_loss(lu.unitary_from_lambdas(lam[0]), keys.test, t.num_test,
                         u.state["target"][0], t)
  rec = [r for r in _finals(workdir) if r["approach"] == "lie_algebra" and r["replicate"] == 0]
  np.testing.assert_allclose(float(loss), rec[0]["test_loss"], rtol=1e-5)
  with pytest.raises(FileNotFoundError, match="no launch"):
    experiments.load_unit(workdir, "n=3 nothing")


@pytest.mark.slow
def test_rerun_skips_finished_units(smoke_run):
  workdir, _, _ = smoke_run
  before = open(os.path.join(workdir, "results.jsonl"), encoding="utf-8").read()
  lines = []
  summary = experiment.train_and_evaluate(_smoke(), workdir, printer=lines.append,
                                          handle_signals=False)
  assert summary.computed == 0 and summary.skipped == 2
  assert sum("already done" in line for line in lines) == 2
  assert open(os.path.join(workdir, "results.jsonl"), encoding="utf-8").read() == before
  assert len(workdir_lib.read_launches(workdir)) == 2  # every launch kept


@pytest.mark.slow
def test_changed_fields_compute_new_units_beside_the_old(smoke_run, tmp_path):
  # The same workdir, another seed, noise level and training-set size: nothing is
  # reused; the report keeps both, the new noise level in tables of its own.
  old_dir, _, _ = smoke_run
  workdir = str(tmp_path / "w")
  os.makedirs(workdir)
  for name in ("results.jsonl", "curves.jsonl", "finished.jsonl"):
    with open(os.path.join(old_dir, name), encoding="utf-8") as f, \
        open(os.path.join(workdir, name), "w", encoding="utf-8") as g:
      g.write(f.read())
  os.makedirs(os.path.join(workdir, "launches"))
  first = sorted(os.listdir(os.path.join(old_dir, "launches")))[0]
  with open(os.path.join(old_dir, "launches", first), encoding="utf-8") as f, \
      open(os.path.join(workdir, "launches", first), "w", encoding="utf-8") as g:
    g.write(f.read())
  changed = _smoke(seeds=(5,), noise_std=0.5, num_train=1000,
                   approaches=("true", "lie_algebra"))
  summary = experiment.train_and_evaluate(changed, workdir, **_QUIET)
  assert summary.computed == 2  # nothing reused
  recs = _finals(workdir)
  assert len({r["unit"] for r in recs}) == 4
  loaded = workdir_lib.load_results(workdir, as_frame=False)
  assert {(r["seed"], r["noise_std"]) for r in loaded} == {(0, 0.01), (5, 0.5)}
  true_new = [r["test_loss"] for r in loaded if r["approach"] == "true" and r["seed"] == 5]
  np.testing.assert_allclose(true_new, 2 * 3 * 0.5 ** 2, rtol=0.3)  # the new noise floor
  report.write_report(workdir)
  text = open(os.path.join(workdir, "report.md"), encoding="utf-8").read()
  assert "num_train=2000, noise_std=0.01" in text and "num_train=1000, noise_std=0.5" in text


class _StopAfter(loop.StopRequest):
  """A stop request that turns on after `calls` checks (as if Ctrl-C came then)."""

  def __init__(self, calls):
    super().__init__()
    self._calls = calls

  def requested(self):
    self._calls -= 1
    if self._calls < 0 and not super().requested():
      self.request("SIGINT")
    return super().requested()


@pytest.mark.slow
def test_a_stop_checkpoints_and_the_resume_gives_the_same_numbers(smoke_run, tmp_path):
  workdir, _, _ = smoke_run
  config = _smoke(approaches=("lie_algebra",))
  stopped = runner.train_and_evaluate(experiment, config, str(tmp_path),
                                      printer=lambda *_: None, stop=_StopAfter(1))
  assert stopped.stopped_by and stopped.computed == 0
  assert os.listdir(tmp_path / "checkpoints")
  lines = []
  summary = experiment.train_and_evaluate(config, str(tmp_path), printer=lines.append,
                                          handle_signals=False)
  assert summary.computed == 1 and any("resumed at step" in l for l in lines), lines
  ref = {r["replicate"]: r for r in _finals(workdir) if r["approach"] == "lie_algebra"}
  for r in _finals(str(tmp_path)):
    np.testing.assert_allclose(r["test_loss"], ref[r["replicate"]]["test_loss"], rtol=1e-6)
  curve_ref = {c["replicate"]: c["val_loss"] for c in workdir_lib.read(
      workdir, "curves.jsonl")}
  for c in workdir_lib.read(tmp_path, "curves.jsonl"):
    np.testing.assert_allclose(c["val_loss"], curve_ref[c["replicate"]], rtol=1e-6)


@pytest.mark.slow
def test_a_stop_after_the_last_step_resumes_to_the_records(smoke_run, tmp_path):
  # Stopped after the last chunk's checkpoint, before the records: the rerun restores
  # the finished state and only evaluates it.
  workdir, _, _ = smoke_run
  config = _smoke(approaches=("lie_algebra",))
  stopped = runner.train_and_evaluate(experiment, config, str(tmp_path),
                                      printer=lambda *_: None, stop=_StopAfter(7))
  assert stopped.stopped_by and stopped.computed == 0  # 4 calls, 2 checks each
  lines = []
  summary = experiment.train_and_evaluate(config, str(tmp_path), printer=lines.append,
                                          handle_signals=False)
  assert summary.computed == 1 and any("resumed at step 100" in l for l in lines), lines
  ref = {r["replicate"]: r for r in _finals(workdir) if r["approach"] == "lie_algebra"}
  for r in _finals(str(tmp_path)):
    np.testing.assert_allclose(r["test_loss"], ref[r["replicate"]]["test_loss"], rtol=1e-6)


@pytest.mark.slow
def test_sharded_over_4_devices_equals_unsharded(smoke_run, tmp_path):
  workdir, _, _ = smoke_run
  script = (
      "import jax, sys\n"
      "assert jax.device_count() == 4, jax.devices()\n"
      "from lie_unitary.experiments.operators import config as c, experiment\n"
      "cfg = c.get_config('operators_smoke'); cfg.n_values = (3,)\n"
      "cfg.approaches = ('lie_algebra',)\n"
      "experiment.train_and_evaluate(cfg, sys.argv[1])\n")
  flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=4"
  env = dict(os.environ, XLA_FLAGS=flags.strip(), PYTHONPATH=_ROOT, OPENBLAS_NUM_THREADS="1")
  subprocess.run([sys.executable, "-c", script, str(tmp_path)], env=env, check=True,
                 cwd=_ROOT, capture_output=True, timeout=300)
  key = lambda r: (r["approach"], r["replicate"])  # noqa: E731
  sharded = {key(r): r for r in _finals(str(tmp_path))}
  single = {key(r): r for r in _finals(workdir)}
  assert len(sharded) == 3
  for k, r in sharded.items():
    np.testing.assert_allclose(r["test_loss"], single[k]["test_loss"], rtol=1e-4)
    np.testing.assert_allclose(r["final_val_loss"], single[k]["final_val_loss"], rtol=1e-4)


@pytest.mark.parametrize("field,value,match", [
    ("approaches", ("lie_algebra", "bogus"), "config.approaches"),
    ("n_values", (0, 3), "config.n_values"),
    ("generators", ("nope",), "config.generators"),
    ("num_epochs", ((6, 1),), "config.num_epochs"),
    ("num_epochs", ((0, 1), (4, 2), (4, 5)), "one \\(n, epochs\\) per n"),  # the last won
    ("val_subsample", 10**8, "at most num_val"),  # clamped, and reported as asked
    ("lr_divisors", (1.0, 1.0), "config.lr_divisors"),  # named no field before
    ("optimizer", "adam", "config.optimizer"),
    ("val_every", 33, "config.val_every"),
    ("basis_scales", (5.0,), "config.basis_scales"),
])
def test_bad_config_values_fail_before_the_workdir_exists(field, value, match, tmp_path):
  config = _smoke(approaches=("true", "arjovsky", "lie_algebra"))
  config[field] = value
  with pytest.raises(runner.ConfigError, match=match):
    experiment.train_and_evaluate(config, str(tmp_path / "w"), **_QUIET)
  assert not os.path.exists(tmp_path / "w")


def test_a_workdir_of_another_family_or_a_file_is_refused(tmp_path):
  # Training went into it, and the report failed at the end (KeyError 'approach').
  other = tmp_path / "rnn"
  (other / "launches").mkdir(parents=True)
  (other / "launches" / "0000-x.json").write_text(json.dumps({"family": "rnn", "units": []}))
  (tmp_path / "file").write_text("")
  for workdir, match in ((other, r"launches of \['rnn'\]; give a operators workdir"),
                         (tmp_path / "file", "not a folder"), ("", "not a folder")):
    with pytest.raises(runner.ConfigError, match=match):
      experiment.train_and_evaluate(_smoke(), str(workdir), **_QUIET)
  assert os.listdir(other / "launches") == ["0000-x.json"]


def test_an_unknown_field_is_named(tmp_path):
  config = _smoke()
  config.unlock()
  config.learning_rte = 0.1
  with pytest.raises(runner.ConfigError, match="learning_rte"):
    experiment.train_and_evaluate(config, str(tmp_path / "w"), **_QUIET)
  assert not os.path.exists(tmp_path / "w")


@pytest.mark.slow
@pytest.mark.parametrize("override,match", [("--config.no_such_field=1", "no_such_field"),
                                            ("--config.optimizer=adam", "config.optimizer")])
def test_the_launcher_reports_config_errors_in_one_line(override, match, tmp_path):
  proc = helpers.launcher("operators", "--config=operators_smoke", override,
                          f"--workdir={tmp_path / 'w'}", cwd=tmp_path)
  assert proc.returncode != 0 and match in proc.stderr
  assert "Traceback" not in proc.stderr, proc.stderr
  assert not os.path.exists(tmp_path / "w" / "results.jsonl")


@pytest.mark.slow
@pytest.mark.parametrize("folder,match", [("", "holds no operators results"),
                                          ("missing", "missing: no such folder")])
def test_report_only_needs_this_familys_results(tmp_path, folder, match):
  proc = helpers.launcher("operators", "--report_only", f"--workdir={tmp_path / folder}",
                          cwd=tmp_path)
  assert proc.returncode != 0 and match in proc.stderr, proc.stderr
  assert "Traceback" not in proc.stderr


def test_the_report_says_a_short_run_is_not_a_result_and_pools_seeds():
  rec = dict(kind="final", n=3, approach="lie_algebra", optimizer="sgd", learning_rate=1e-3,
             basis_scale=0.0, num_train=2000, num_epochs=1, test_loss=1.0, replicate=0,
             unit="u", field="complex")
  text = report.markdown([dict(rec, seed=0), dict(rec, seed=1, unit="v", test_loss=3.0)])
  assert "A short run (2,000 training pairs" in text
  # One table, both seeds: losses 1 and 3, standard error std(ddof=1) / √2 = 1.
  assert "seeds 0, 1." in text and "| 3 | 1 | 2 ± 1 " in text
  text = report.markdown([dict(rec, seed=0, num_train=1_000_000)])
  assert "short run" not in text


def test_every_named_config_is_valid_and_documented():
  for name in cfg_lib.NAMED_CONFIGS:
    config = cfg_lib.get_config(name)
    experiment.validate_config(config)
    assert experiment.units(config)
    path = os.path.join(fields.config_dir(), name + ".py")
    assert ast.get_docstring(ast.parse(open(path, encoding="utf-8").read())), path
  assert json.loads(cfg_lib.get_config("table1").to_json())["num_replicates"] == 18
  with pytest.raises(ValueError, match="unknown operators config 'nope'"):
    cfg_lib.get_config("nope")


def test_unit_identity_ignores_nothing_that_computes():
  base = {u.name: u.id for u in experiment.units(_smoke())}
  for field, value in (("seeds", (1,)), ("noise_std", 0.02), ("num_train", 1000),
                       ("learning_rate", 2e-3), ("dtype", "complex128"), ("num_replicates", 2),
                       ("lie_target_std", 0.5), ("val_subsample", 100)):
    changed = {u.name: u.id for u in experiment.units(_smoke(**{field: value}))}
    assert all(changed[n] != base[n] for n in changed if n in base
               if not (n.endswith("baselines") and field in ("learning_rate", "val_subsample"))
               ), field
  assert {u.name: u.id for u in experiment.units(_smoke())} == base  # stable


def test_a_stopped_launch_exits_as_the_signal_ended_it():
  from lie_unitary.experiments import launch
  assert launch.interrupted_status("SIGINT") == 130  # 128 + 2, as a shell reports it
  assert launch.interrupted_status("SIGTERM") == 143
  assert launch.interrupted_status("test") == 1  # stopped for another reason: not 0


@pytest.mark.slow
def test_ctrl_c_finishes_the_chunk_checkpoints_and_exits_130(tmp_path):
  import signal
  env = dict(os.environ, PYTHONPATH=_ROOT, OPENBLAS_NUM_THREADS="1", PYTHONUNBUFFERED="1")
  cmd = [sys.executable, "-m", "lie_unitary.experiments.operators", "--config=operators_smoke",
         "--config.n_values=(3,)", "--config.approaches=('lie_algebra',)",
         "--config.num_train=4000", f"--workdir={tmp_path}"]
  proc = subprocess.Popen(cmd, env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
  first = proc.stdout.readline()  # "1 unit(s) on ..." : the run has started
  assert "unit(s)" in first, first
  proc.send_signal(signal.SIGINT)  # during the first chunk (or its compilation)
  out = first + proc.communicate(timeout=300)[0]
  assert proc.returncode == 128 + signal.SIGINT == 130, out  # stopped, not finished
  assert "SIGINT: stopping after the current call" in out and "Traceback" not in out, out
  assert "stopped at a checkpoint (SIGINT); rerun the same command to resume" in out
  assert os.listdir(tmp_path / "checkpoints")  # resuming from it: the in-process test above
  assert not os.path.exists(tmp_path / "finished.jsonl")
