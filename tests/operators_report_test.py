"""The operator report on synthetic records: tables beside the paper, figures, files."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.operators import report
from scripts import detail_tables

import helpers

_GENERATORS = ("lie", "qr", "composition")
_TRAINED = {"projection": 9.0, "arjovsky": 6e-4, "lie_algebra": 6e-4}


def _unit(n, approach, epochs=1, lr=1e-3, c=0.0, seed=0):
  name = (f"n={n} baselines" if approach == "baselines"
          else f"n={n} {approach} epochs={epochs} lr={lr:g}" + (f" c={c:g}" if c else ""))
  return name, f"{name.replace(' ', '_')}-s{seed}"


def _final(n, approach, replicate, test_loss, *, unit, optimizer="sgd", lr=1e-3, epochs=1,
           c=0.0, field="complex", seed=0):
  name, uid = unit
  return dict(unit=uid, unit_name=name, kind="final", replicate=replicate,
              step=0 if optimizer == "none" else 100 * epochs, n=n, field=field,
              approach=approach, generator=_GENERATORS[replicate % 3], optimizer=optimizer,
              learning_rate=lr, num_epochs=epochs, basis_scale=c, seed=seed, noise_std=0.01,
              num_train=500, test_loss=test_loss, final_val_loss=test_loss, seconds=1.5)


def _curve(rec, losses):
  return dict(rec, kind="curve", val_steps=list(range(0, 25 * len(losses), 25)),
              val_loss=list(losses))


def _table1_records(seed=0, trained_shift=0.0):
  """Baselines and three trained approaches at n = 3 and 6, three replicates each."""
  rng = np.random.default_rng(seed)
  recs, curves, units = [], [], []
  for n in (3, 6):
    base = _unit(n, "baselines", seed=seed)
    units.append(base)
    for r in range(3):
      for a, v in (("true", 6e-4), ("lstsq", 7e-4), ("procrustes", 6.5e-4), ("rand", 4.0 * n)):
        recs.append(_final(n, a, r, v * (1 + 0.01 * rng.standard_normal()), unit=base,
                           optimizer="none", seed=seed))
    for a, v in _TRAINED.items():
      u = _unit(n, a, seed=seed)
      units.append(u)
      for r in range(3):
        rec = _final(n, a, r, v * (1 + 0.01 * rng.standard_normal()) + trained_shift,
                     unit=u, seed=seed)
        recs.append(rec)
        curves.append(_curve(rec, [10.0, 1.0, v]))
  return recs, curves, units


def _write_workdir(wd, launches):
  """launches: [(records, curves, units)]; each gets a launch file, in order."""
  for i, (recs, curves, units) in enumerate(launches, 1):
    helpers.write_launch(wd, i, units)
    workdir_lib.append_records(os.path.join(wd, "results.jsonl"), recs)
    workdir_lib.append_records(os.path.join(wd, "curves.jsonl"), curves)
  return wd


def test_table_beside_the_paper_and_figure2():
  recs, curves, _ = _table1_records()
  text = report.markdown(recs)
  assert "## Test loss (sgd, lr 0.001)" in text
  assert "| 3 | 1 |" in text and "(12.5 ± 0.4)" in text  # rand at n = 3, Table 1
  assert "(24 ± 1)" in text and "(8 ± 1)" in text  # rand at n = 6, projection at n = 3
  header = next(line for line in text.splitlines() if line.startswith("| n |"))
  assert header == ("| n | epochs | true | lstsq | procrustes | projection | arjovsky | "
                    "lie_algebra | rand |")
  row3 = next(line for line in text.splitlines() if line.startswith("| 3 |"))
  assert row3.split(" | ")[-1].startswith("12 ± ")  # our rand ≈ 4n beside the paper's
  from matplotlib.figure import Figure  # here: matplotlib's import slows every worker
  figs = report.figures(recs, curves)
  assert set(figs) == {"figure2"}
  assert isinstance(figs["figure2"], Figure)
  assert len(figs["figure2"].axes) == 1  # every approach on one log scale


def test_a_cell_and_a_figure2_bar_are_mean_and_ddof_1_standard_error():
  u = _unit(3, "lie_algebra")
  recs = [_final(3, "lie_algebra", r, v, unit=u) for r, v in enumerate((1.0, 2.0, 6.0))]
  recs += [_final(3, "rand", r, 10.0, unit=_unit(3, "baselines"), optimizer="none")
           for r in range(3)]
  # 1, 2, 6: mean 3, sample variance 7, standard error √(7 / 3) = 1.53.
  assert "| 3 ± 1.53 (6.003e-04 ± 3.000e-07) |" in report.markdown(recs)
  assert "ddof = 1" in report.markdown(recs)
  # Figure 2 with one generator: a bar at 3 / 10 (the rand mean), capped at ± √(7 / 3) / 10.
  recs = [dict(r, generator="lie") for r in recs]
  ax = report.figures(recs)["figure2"].axes[0]
  ys = sorted(float(y) for line in ax.lines for y in line.get_ydata())
  se = math.sqrt(7 / 3) / 10
  assert ys == pytest.approx([0.3 - se, 0.3, 0.3 + se])  # the mean and its two caps


def test_groups_by_optimizer_and_learning_rate():
  recs, _, _ = _table1_records()
  u = _unit(3, "lie_algebra", lr=1e-2)
  recs += [_final(3, "lie_algebra", r, 0.5, unit=u, optimizer="rmsprop", lr=1e-2)
           for r in range(3)]
  text = report.markdown(recs)
  assert "## Test loss (sgd, lr 0.001)" in text and "## Test loss (rmsprop, lr 0.01)" in text
  rms = text.split("## Test loss (rmsprop, lr 0.01)")[1]
  assert "| n | epochs | true | lstsq | procrustes | lie_algebra | rand |" in rms  # shared


def test_table2_beside_the_paper():
  recs = []
  base = _unit(8, "baselines")
  recs += [_final(8, a, r, v, unit=base, optimizer="none")
           for r in range(2) for a, v in (("true", 2e-3), ("rand", 31.0))]
  for a, v in (("arjovsky", 1.2), ("lie_restricted", 1.0), ("lie_algebra", 0.04)):
    recs += [_final(8, a, r, v, unit=_unit(8, a)) for r in range(2)]
  text = report.markdown(recs)
  assert "### Table 2 (sgd) beside the paper's Table 2" in text
  table2 = text.split("### Table 2")[1]
  assert "| n | epochs | arjovsky | lie_restricted | lie_algebra |" in table2
  assert "(1.2 ± 0.1)" in table2 and "(1 ± 0.2)" in table2 and "(0.04 ± 0.01)" in table2


def test_a_record_written_twice_counts_once():
  recs, _, _ = _table1_records()
  once = report.markdown(recs)
  assert f"{len(recs)} records" in once
  assert report.markdown(recs + recs[:5]) == once


def test_the_script_counts_orthogonal_components_for_real_targets():
  u = _unit(3, "projection_orthogonal")
  base = _unit(3, "baselines")
  recs = [_final(3, "projection_orthogonal", r, v, unit=u, field="real")
          for r, v in enumerate((4.0006, 0.0006, 0.0007))]
  recs += [_final(3, "rand", r, 12.0, unit=base, optimizer="none", field="real")
           for r in range(3)]
  assert "(12.5 ± 0.4)" not in report.markdown(recs)  # no paper values for SO(n) targets
  assert "- n = 3: 1 of 3 (their mean test loss 4.001)" in detail_tables.operators_lines(recs)


def test_the_script_divides_each_trained_loss_by_the_noise_floor():
  u, base = _unit(3, "lie_algebra"), _unit(3, "baselines")
  recs = [_final(3, "lie_algebra", r, v, unit=u) for r, v in enumerate((0.0012, 0.0018))]
  recs += [_final(3, "true", r, 6e-4, unit=base, optimizer="none") for r in range(2)]
  table = detail_tables.operators_lines(recs)
  assert table[0].startswith("Test loss over the noise floor") and "sgd, lr 0.001" in table[0]
  assert table[2:5] == ["| n | lie_algebra |", "|---|---|", "| 3 | 2.5 |"]  # 0.0015 / 0.0006


def test_the_script_pairs_the_closed_form_baselines_with_the_truth_by_replicate():
  base, u = _unit(3, "baselines"), _unit(3, "projection")
  true = (6.0e-4, 6.4e-4)  # replicates differ by far more than the paired gaps
  recs = [_final(3, "true", r, t, unit=base, optimizer="none") for r, t in enumerate(true)]
  recs += [_final(3, "procrustes", r, t + d, unit=base, optimizer="none")
           for r, (t, d) in enumerate(zip(true, (1e-9, 3e-9)))]
  recs += [_final(3, "lstsq", r, t + 4e-9, unit=base, optimizer="none")
           for r, t in enumerate(true)]
  recs += [_final(3, "projection", r, t + g, unit=u)
           for r, (t, g) in enumerate(zip(true, (1e-7, -1e-8)))]
  header, _, head, rule, row, _ = detail_tables.procrustes_lines(recs)
  assert header.startswith("Closed-form baselines over the truth")
  # σ² n² / P = 1e-4 · 9 / 500 = 1.8e-06 for procrustes, twice that for lstsq; the noise
  # floor 2nσ² = 6e-4. Paired: (1e-9, 3e-9) → 2e-9 ± 1e-9; lstsq 4e-9 both, s.e. 0.
  cells = [c.strip() for c in row.strip("|").split("|")]
  assert cells[:2] == ["3", "0.0006"]
  assert cells[2] == "2.00e-09 ± 1.00e-09 (1.80e-06)"
  assert cells[3].startswith("4.00e-09 ± ") and cells[3].endswith("(3.60e-06)")
  assert float(cells[3].split(" ± ")[1].split()[0]) < 1e-15
  # projection − procrustes: 1e-7 − 1e-9 and −1e-8 − 3e-9; one of the two above.
  assert cells[4] == "projection (sgd): 4.30e-08 ± 5.60e-08, 1 of 2 above"
  assert detail_tables.procrustes_lines([r for r in recs if r["approach"] != "procrustes"]) == []
  # Real targets (SO(n)): floor nσ² = 4e-4 at n = 4; d = n(n − 1)/2 = 6 for O(n) (1.2e-6),
  # n² = 16 for every real matrix (3.2e-6).
  real = [dict(r, n=4, field="real") for r in recs if r["optimizer"] == "none"]
  *_, head, _, row, _ = detail_tables.procrustes_lines(real)
  assert "noise floor nσ²" in head
  cells = [c.strip() for c in row.strip("|").split("|")]
  assert cells[1] == "0.0004" and cells[2].endswith("(1.20e-06)")
  assert cells[3].endswith("(3.20e-06)") and cells[4] == "—"


def test_appendix_b_grid_and_figure():
  recs, curves = [], []
  base = _unit(8, "baselines")
  recs += [_final(8, a, r, v, unit=base, optimizer="none")
           for r in range(2) for a, v in (("true", 2e-3), ("rand", 31.0))]
  for c in (0.0, 1.0):
    for lr in (1e-3, 1e-2):
      u = _unit(8, "lie_algebra", lr=lr, c=c)
      for r in range(2):
        rec = _final(8, "lie_algebra", r, 0.1 + c, unit=u, lr=lr, c=c)
        recs.append(rec)
        curves.append(_curve(rec, [10.0, 1.0 + c, 0.1 + c]))
  text = report.markdown(recs)
  assert "## Appendix B: change of basis, lie_algebra (final test loss)" in text
  assert "| c \\ lr | 0.01 | 0.001 |" in text
  assert "| 0 | 0.1 ± " in text and "| 1 | 1.1 ± " in text
  assert "## Test loss" not in text  # the sweep gets the grid, not the Table-1 layout
  figs = report.figures(recs, curves)
  assert set(figs) == {"basis_change"}  # no Figure 2 for a basis sweep
  assert len(figs["basis_change"].axes) == 4


def test_write_report_pools_every_seed_and_keeps_other_tasks_apart(tmp_path):
  seed0, seed1 = _table1_records(seed=0), _table1_records(seed=1, trained_shift=1.0)
  noisier = _table1_records(seed=0)  # a launch at another noise level: its own tables
  noisier = ([dict(r, noise_std=0.1, unit=r["unit"] + "-noisy") for r in noisier[0]], [],
             [(name, uid + "-noisy") for name, uid in noisier[2]])
  wd = _write_workdir(str(tmp_path), [seed0, seed1, noisier])
  paths = report.write_report(wd)
  assert paths == [os.path.join(wd, p) for p in ("report.md", "figure2.png")]
  assert os.path.getsize(paths[1]) > 1000
  text = open(paths[0], encoding="utf-8").read()
  assert f"{len(seed0[0]) * 3} records from" in text and "seeds 0, 1." in text
  tables = text.split("## Test loss (sgd, lr 0.001)")
  assert len(tables) == 3 and tables[1].startswith(" — noise_std=0.01")
  assert tables[2].startswith(" — noise_std=0.1")
  row = next(line for line in tables[1].splitlines() if line.startswith("| 3 |"))
  # Six runs of lie_algebra (three replicates of two seeds), one shifted by 1.0: mean 0.5.
  assert "| 0.501 ± " in row, row
  assert "![figure 2](figure2.png)" in text


def test_write_report_with_given_records_and_a_basis_sweep(tmp_path):
  recs, curves = [], []
  for c in (0.0, 1.0):
    u = _unit(8, "lie_algebra", c=c)
    rec = _final(8, "lie_algebra", 0, 0.1, unit=u, c=c)
    recs.append(rec)
    curves.append(_curve(rec, [1.0, 0.1]))
  paths = report.write_report(str(tmp_path), recs, curves)
  assert paths == [str(tmp_path / "report.md"), str(tmp_path / "basis_change.png")]
  assert "![appendix B grid](basis_change.png)" in (tmp_path / "report.md").read_text()


def test_frames_work_like_lists(tmp_path):
  pytest.importorskip("pandas")
  from lie_unitary.experiments import workdir as workdir_lib
  wd = _write_workdir(str(tmp_path), [_table1_records()])
  df = workdir_lib.load_results(wd, as_frame=True)
  curves = workdir_lib.load_results(wd, "curves.jsonl", as_frame=True)
  assert report.markdown(df) == report.markdown(workdir_lib.load_results(wd, as_frame=False))
  assert set(report.figures(df, curves)) == {"figure2"}


_NOTEBOOK = """
import sys
import matplotlib
matplotlib.use("svg")
from lie_unitary.experiments.operators import report
paths = report.write_report(sys.argv[1])
assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
assert "matplotlib.pyplot" not in sys.modules
print(len(paths))
"""


@pytest.mark.slow
def test_write_report_leaves_the_backend_alone(tmp_path):
  wd = _write_workdir(str(tmp_path), [_table1_records()])
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  out = subprocess.run([sys.executable, "-c", _NOTEBOOK, wd], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": root}, check=False)
  assert out.returncode == 0, out.stderr
  assert out.stdout.strip() == "2"
  assert os.path.getsize(os.path.join(wd, "figure2.png")) > 1000


# The committed runs of the paper's §3 (results/): the configs' own units, each report what
# its records give.
_COMMITTED = {"operators_table1": (("table1", {}), ("table2", {})),
              "operators_basis_change": (("basis_change", {}),),
              "operators_one_epoch": (("table1", {"num_epochs": ((0, 1),)}),
                                      ("table1_rmsprop", {})),
              "operators_orthogonal": (("orthogonal", {}),)}
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("folder", sorted(_COMMITTED))
def test_the_committed_folders_units_are_their_configs_units(folder):
  from lie_unitary.experiments import fields
  from lie_unitary.experiments.operators import experiment
  want = set()
  for name, overrides in _COMMITTED[folder]:
    config = fields.load_config("operators", name)
    config.update(overrides)
    experiment.validate_config(config)
    want |= {u.id for u in experiment.units(config)}
  assert set(workdir_lib.units(os.path.join(_ROOT, "results", folder))) == want


@pytest.mark.parametrize("folder", sorted(_COMMITTED))
def test_the_committed_report_is_what_its_records_give(folder):
  path = os.path.join(_ROOT, "results", folder)
  figures = {os.path.splitext(f)[0]: f for f in os.listdir(path) if f.endswith(".png")}
  text = report.markdown(workdir_lib.load_results(path, as_frame=False), figure_files=figures,
                         source=os.path.join("results", folder, "results.jsonl"),
                         launches=workdir_lib.read_launches(path))
  with open(os.path.join(path, "report.md"), encoding="utf-8") as f:
    assert f.read() == text, (f"results/{folder}/report.md is stale: python -m "
                              f"lie_unitary.experiments.operators --workdir=results/{folder} "
                              "--report_only")
