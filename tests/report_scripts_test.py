"""The scripts that draw what one question needed, over the records: the λ chart's
spectrum of an operators workdir, an RNN folder's loss and drift curves, the detail tables
of every family."""

import os

import pytest

from lie_unitary.experiments import workdir
from lie_unitary.experiments.rnn import report as rnn_report
from scripts import detail_tables
from scripts import image_curves
from scripts import spectrum_figure

import helpers


def _curve(replicate, val_loss, spread, sinc, **fields):
  return dict(dict(kind="curve", unit="u", n=3, approach="lie_algebra", replicate=replicate,
                   optimizer="sgd", learning_rate=1e-3, num_epochs=1, basis_scale=0.0,
                   val_steps=[0, 10, 20], val_loss=val_loss, theta_spread=spread,
                   min_sinc=sinc), **fields)


def test_the_spectrum_figure_draws_each_fields_median_over_replicates():
  curves = [_curve(0, [1.0, 0.5, 0.2], [0.1, 0.2, 0.3], [1.0, 0.9, None]),
            _curve(1, [3.0, 1.5, 0.4], [0.3, 0.4, 0.5], [1.0, 0.7, 0.6]),
            _curve(2, [2.0, 1.0, 0.3], [0.2, 0.3, 0.4], [1.0, 0.8, 0.5])]
  fig = spectrum_figure.spectrum_figure(curves)
  loss, spread, sinc = (ax.lines[0].get_ydata() for ax in fig.axes)
  assert list(loss) == pytest.approx([2.0, 1.0, 0.3])
  assert list(spread) == pytest.approx([0.2, 0.3, 0.4])
  assert list(sinc) == pytest.approx([1.0, 0.8, 0.55])  # None: left out of the median
  assert fig.axes[0].get_title() == "n = 3"
  assert spectrum_figure.spectrum_figure([dict(c, basis_scale=2.0) for c in curves]) is None


def test_the_spectrum_script_writes_the_figure_beside_the_records(tmp_path):
  curves = [_curve(r, [1.0, 0.5, 0.2], [0.1, 0.2, 0.3], [1.0, 0.9, 0.8]) for r in range(2)]
  workdir.append_records(tmp_path / workdir.CURVES, curves + curves[:1])  # one written twice
  assert spectrum_figure.main([str(tmp_path)]) == 0
  assert os.path.getsize(tmp_path / "spectrum.png") > 0
  assert spectrum_figure.main([]) == 2


def test_the_detail_tables_script_tells_a_folders_family_by_its_records(tmp_path):
  rnn = helpers.image_records("gurnn", [[0.1, 0.70], [0.1, 0.74]])
  basis = [dict(kind="final", unit="u", approach="learned", replicate=0, n=6, k=3, m=4,
                pairs=2, subalgebra="general", coef_std=1.0, test_loss=1.0, train_loss=0.5,
                noise_floor=1e-3, angle_max=0.8, angle_mean=0.4)]
  operators = [dict(kind="final", unit="u", n=3, approach=a, replicate=0, seed=0,
                    optimizer=o, learning_rate=1e-3, num_epochs=1, basis_scale=0.0,
                    test_loss=v) for a, o, v in (("true", "none", 0.5), ("arjovsky", "sgd", 2.0))]
  for name, recs in (("rnn", rnn), ("basis", basis), ("operators", operators)):
    workdir.append_records(tmp_path / name / "results.jsonl", recs)
  # Epoch 1: test accuracies 0.70 and 0.74, mean 72 ± 2.
  assert "| 1 | 72.00 ± 2.00 |" in detail_tables.lines(str(tmp_path / "rnn"))
  assert "| 6 | 3 | 4 | 2 | general | 1.0 | 1 of 1 | 1 | 0 | 0 |" in detail_tables.lines(
      str(tmp_path / "basis"))  # train loss 0.5 > 2 × floor: stuck
  assert "| 3 | 4 |" in detail_tables.lines(str(tmp_path / "operators"))  # 2.0 / 0.5


def test_the_image_curves_draw_loss_and_drift_per_epoch(tmp_path):
  recs = helpers.image_records("gurnn", [[0.1, 0.70, 0.80], [0.1, 0.74, 0.78]])
  recs += helpers.image_records("lstm", [[0.1, 0.5, 0.6], [0.1, 0.5, 0.6]])
  for r in recs:
    r["val_loss"] = 2.0 / (1 + r["epoch"]) + 0.1 * r["replicate"]
    if r["model"] == "gurnn":
      r["u_drift"] = 0.1 * r["epoch"] + 0.02 * r["replicate"]
  rows, = rnn_report.table_rows(recs, images=True).values()
  loss, drift, by_time = image_curves.curves_figure(rows).axes
  # The mean over the two replicates at epochs 0, 1, 2.
  line, = [ln for ln in loss.lines if ln.get_color() == "C0"]
  assert list(line.get_ydata()) == pytest.approx([2.05, 1.05, 2 / 3 + 0.05])
  line, = drift.lines  # the LSTM has no recurrent matrix of its own
  assert line.get_label() == "guRNN (modReLU)"
  assert list(line.get_ydata()) == pytest.approx([0.01, 0.11, 0.21])
  line = by_time.lines[0]  # accuracy (validation: test − 1 %) against the mean seconds
  assert list(line.get_xdata()) == [0.0, 10.0, 20.0]
  assert list(line.get_ydata()) == pytest.approx([9.0, 71.0, 78.0])
  workdir.append_records(tmp_path / "results.jsonl", recs)
  assert image_curves.main([str(tmp_path)]) == 0
  assert os.path.getsize(tmp_path / "curves_permuted_fashion_mnist.png") > 0


def test_the_table_scripts_name_a_folder_they_cannot_read(tmp_path, capsys):
  # A traceback before for a missing folder; no output and exit 0 for another kind.
  from scripts import run_table
  (tmp_path / "empty").mkdir()
  for main in (detail_tables.main, run_table.main, image_curves.main):
    assert main([str(tmp_path / "missing")]) == 2
    assert "missing: no workdir" in capsys.readouterr().err
    assert main(["--help"]) == 2 and "python scripts/" in capsys.readouterr().err
  other = os.path.join(os.path.dirname(os.path.dirname(__file__)), "results", "adding_T100")
  for main, match in ((detail_tables.main, "no records of an RNN image task"),
                      (run_table.main, "no sequential-image records"),
                      (image_curves.main, "no sequential-image records")):
    assert main([other]) == 2 and match in capsys.readouterr().err
