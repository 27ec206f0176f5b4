"""The hidden-subalgebra family: data, the oracle against its floor, angles, configs,
unit ids, the report, and the smoke config end to end through the runner."""

import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary.experiments import fields as F
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.basis import experiment
from lie_unitary.experiments.basis import report
from scripts import detail_tables

_QUIET = dict(printer=lambda *_: None, handle_signals=False)


def _smoke(**changes):
  config = F.load_config("basis", "basis_smoke")
  for k, v in changes.items():
    config[k] = v
  return config


_CELL = dict(n=4, k=2, m=3, pairs=4, num_test=64, num_steps=600, restarts=1, sweeps=())


def _spec(approach="oracle", **changes):
  """The spec of a unit at n = 4, k = 2, m = 3, 4 pairs, as `experiment.units` makes it."""
  return experiment.units(_smoke(approaches=(approach,), **dict(_CELL, **changes)))[0].spec


def _record(approach, **changes) -> dict:
  """Replicate 0's record of that unit after every step, through its `loop.Task`."""
  config = _smoke(approaches=(approach,), **dict(_CELL, **changes))
  unit = experiment.units(config)[0]
  task = experiment.make_task(config, unit, replicas_lib.Replicas(config.num_replicates))
  state, history = task.init()
  if unit.target_step:
    state, history = task.train(state, history, 0, unit.target_step)
  return task.finish(state, history)[workdir_lib.RESULTS][0]


_make_data = jax.jit(experiment.make_data, static_argnums=1)  # as the task runs it: traced


def test_operators_and_pairs_are_shared_across_m_and_pairs():
  key = jax.random.key(3)
  small = _make_data(key, _spec(m=2, pairs=2))
  big = _make_data(key, _spec(m=3, pairs=5))
  np.testing.assert_array_equal(small["gstar"], big["gstar"])
  np.testing.assert_allclose(small["targets"], big["targets"][:2], atol=1e-6)
  np.testing.assert_allclose(small["train"][0], big["train"][0][:2, :2], atol=1e-6)
  np.testing.assert_allclose(small["test"][1], big["test"][1][:2], atol=1e-6)
  # Targets are unitary, and noiseless pairs follow them.
  u = np.asarray(big["targets"], np.complex128)
  np.testing.assert_allclose(u @ np.conj(np.swapaxes(u, 1, 2)),
                             np.broadcast_to(np.eye(4), u.shape), atol=2e-6)
  clean = _make_data(key, _spec(noise_std=0.0))
  x, y = (np.asarray(a, np.complex128) for a in clean["train"])
  np.testing.assert_allclose(y, np.einsum("mpj,mij->mpi", x, np.asarray(clean["targets"])),
                             atol=2e-5)


@pytest.mark.parametrize("subalgebra", [  # the commuting one in the full suite only
    "general", pytest.param("commuting", marks=pytest.mark.slow)])
def test_oracle_reaches_the_noise_floor_with_zero_principal_angles(subalgebra):
  noisy = _record("oracle", subalgebra=subalgebra)
  floor = 2 * 4 * 0.01 ** 2  # 2nσ², estimated from 192 noisy test pairs (s.e. ≈ 3%)
  assert 0.9 * floor < float(noisy["test_loss"]) < 1.3 * floor
  assert float(noisy["angle_max"]) < 1e-5  # M = G*: the same span
  # A fixed random basis is far from span(G*), and fits worse.
  rand = _record("random_fixed", subalgebra=subalgebra)
  assert float(rand["angle_max"]) > 0.3 and float(rand["test_loss"]) > 10 * floor


@pytest.mark.slow
@pytest.mark.parametrize("subalgebra", ["general", "commuting"])
def test_without_noise_the_oracle_fits_exactly(subalgebra):
  clean = _record("oracle", subalgebra=subalgebra, noise_std=0.0)
  assert float(clean["test_loss"]) < 1e-6 and float(clean["train_loss"]) < 1e-6


def test_procrustes_fits_each_operator_in_closed_form():
  out = _record("procrustes", pairs=40)
  floor = 2 * 4 * 0.01 ** 2
  assert floor < float(out["test_loss"]) < 1.2 * floor and np.isnan(float(out["angle_max"]))
  # The least-squares unitary: on its own training pairs no worse than the truth.
  spec = _spec("procrustes", pairs=40)
  key = jax.random.key(0)  # the unit's: seed 0 folded with n, k and subalgebra's index
  for value in (4, 2, 0):
    key = jax.random.fold_in(key, value)
  key = jax.random.split(jax.random.fold_in(key, 0))[0]  # replicate 0's data
  data = _make_data(key, spec)
  x, y = (np.asarray(a, np.complex128) for a in data["train"])
  err = np.einsum("mpj,mij->mpi", x, np.asarray(data["targets"], np.complex128)) - y
  truth = np.mean(np.sum(np.abs(err) ** 2, axis=-1))
  assert float(out["train_loss"]) <= truth * (1 + 1e-5)


@pytest.mark.parametrize("field,value,match", [
    ("no_such_field", 1, "no_such_field"),
    ("approaches", ("learned", "pca"), "config.approaches"),
    ("k", 10, "config.k = 10"),  # > n² = 9
    ("sweeps", ((("subalgebra", "k"), (("commuting", 4),)),), "config.sweeps"),  # k > n
    ("sweeps", (("size", (3,)),), "config.sweeps"),
    ("learning_rates", (), "config.learning_rates"),
    ("restarts", 0, "config.restarts"),
])
def test_config_errors_name_the_field(field, value, match):
  config = _smoke()
  config[field] = value
  with pytest.raises(runner.ConfigError, match=match):
    experiment.validate_config(config)


def test_every_named_config_validates_and_unit_ids_hold_only_what_computes():
  for name in ("basis", "basis_smoke"):
    experiment.validate_config(F.load_config("basis", name))
  ids = lambda config: {u.name: u.id for u in experiment.units(config)}  # noqa: E731
  base = ids(_smoke())
  assert len(base) == 10  # 2 cells × 5 approaches
  more_restarts = ids(_smoke(restarts=3))
  assert [n for n in base if base[n] != more_restarts[n]] == [
      n for n in base if n.endswith(" learned")]
  other_rate = ids(_smoke(learning_rates=(1e-2,)))
  assert [n for n in base if base[n] == other_rate[n]] == [
      n for n in base if n.endswith(" procrustes")]
  assert all(base[n] != v for n, v in ids(_smoke(noise_std=0.02)).items())


def _rec(approach, test_loss, m=16, replicate=0, angle=np.nan, **cell):
  cell = dict(report.TARGET_CELL, m=m, **cell)
  return dict(kind="final", unit=f"{approach}-{m}", replicate=replicate, approach=approach,
              test_loss=test_loss, train_loss=test_loss / 2, angle_max=angle,
              angle_mean=angle / 2, noise_floor=1.2e-3,
              wrapped=0.0, **cell)


def test_the_report_states_the_targets_and_a_table_per_sweep():
  recs = [_rec(a, v * (1 + 0.1 * r), replicate=r, angle=0.05)
          for a, v in (("learned", 2e-3), ("oracle", 1.4e-3), ("full", 0.3))
          for r in range(3)]
  recs += [_rec("learned", 1.0, m=4, replicate=r, angle=0.8) for r in range(3)]
  text = report.markdown(recs)
  # Means: learned 0.0022 / oracle 0.00154 = 1.43; full 0.33 / learned = 150.
  assert "| means | 1.43 | 150 |" in text
  assert "## Against m (n = 6, k = 3, pairs = 2" in text
  assert "| m | runs | noise floor | learned | full | oracle | learned: max angle |" in text
  assert "| 4 | 3 | 0.0012 | 1 ± 0 | — | — | 0.8 ± " in text
  assert text.count(" of 3 |") == 2 and "| 0.05 ± 4.91e-18 | 0.025 ± 2.45e-18 | 3 of 3 |" in text
  failed = detail_tables.basis_lines(recs)  # the failures: a table of the script
  assert "| 6 | 3 | 4 | 2 | general | 1.0 | 3 of 3 | 3 | 0 | 0 |" in failed  # stuck
  assert set(report.figures(recs)) == {"angles_vs_m"}


@pytest.mark.slow
def test_smoke_runs_through_the_runner_and_writes_records_and_a_report(tmp_path):
  workdir = str(tmp_path)
  summary = experiment.train_and_evaluate(_smoke(), workdir, **_QUIET)
  assert summary.computed == 10 and not summary.stopped_by
  recs = workdir_lib.read(workdir)
  assert len(recs) == 10 * 2  # a record per unit and replicate
  for r in recs:
    for field in ("unit", "approach", "n", "k", "m", "pairs", "subalgebra", "coef_std",
                  "replicate", "test_loss", "train_loss", "val_loss", "noise_floor", "seed"):
      assert field in r, field
    assert np.isfinite(r["test_loss"]) and r["kind"] == "final"
  assert {r["pairs"] for r in recs} == {1, 2}
  paths = experiment.write_report(workdir)
  assert [os.path.basename(p) for p in paths] == ["report.md", "loss_vs_pairs.png"]
  text = open(paths[0], encoding="utf-8").read()
  assert "## Against pairs (n = 3, k = 2, m = 4" in text
  # Every unit ran in the loop (procrustes at step 0): each left its checkpoint.
  assert len(os.listdir(os.path.join(workdir, "checkpoints"))) == 10
  again = experiment.train_and_evaluate(_smoke(), workdir, **_QUIET)
  assert again.computed == 0 and again.skipped == 10
  assert jnp.asarray(0).dtype == jnp.int32  # x64 left off after the run


def test_the_published_folders_units_are_the_basis_configs_units():
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  have = workdir_lib.units(os.path.join(root, "results", "learned_basis"))
  config = F.load_config("basis", "basis")
  experiment.validate_config(config)
  assert len(have) == 80 and set(have) == {u.id for u in experiment.units(config)}


def test_the_committed_report_is_what_its_records_give():
  folder = os.path.join("results", "learned_basis")
  path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), folder)
  if not os.path.exists(os.path.join(path, "report.md")):
    pytest.skip("no results/learned_basis/report.md")
  figures = {k: f"{k}.png" for k in ("loss_vs_pairs", "angles_vs_m")
             if os.path.exists(os.path.join(path, f"{k}.png"))}
  text = report.markdown(workdir_lib.load_results(path, as_frame=False), figures,
                         source=os.path.join(folder, "results.jsonl"),
                         launches=workdir_lib.read_launches(path))
  with open(os.path.join(path, "report.md"), encoding="utf-8") as f:
    assert f.read() == text, ("stale: python -m lie_unitary.experiments.basis "
                              "--workdir=results/learned_basis --report_only")


@pytest.mark.slow
def test_a_stopped_learned_unit_resumes_to_the_uninterrupted_numbers(tmp_path):
  from lie_unitary.experiments import loop
  config = _smoke(sweeps=(), approaches=("learned",), num_steps=6)
  whole, parts = str(tmp_path / "whole"), str(tmp_path / "parts")
  experiment.train_and_evaluate(config, whole, **_QUIET)
  stop = loop.StopRequest()
  stop.request("SIGINT")  # as if Ctrl-C came during the first call (one step)
  assert runner.train_and_evaluate(experiment, config, parts, printer=lambda *_: None,
                                   stop=stop).stopped_by
  assert workdir_lib.read(parts) == []
  lines = []
  experiment.train_and_evaluate(config, parts, printer=lines.append, handle_signals=False)
  assert any("resumed at step 1" in x for x in lines), lines
  got, want = (sorted(workdir_lib.read(w), key=lambda r: r["replicate"]) for w in (parts, whole))
  assert len(got) == len(want) == config.num_replicates
  for a, b in zip(got, want):
    for field in ("test_loss", "train_loss", "val_loss", "angle_max", "learning_rate"):
      np.testing.assert_allclose(a[field], b[field], rtol=1e-6, err_msg=field)
