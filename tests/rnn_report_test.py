"""The RNN report on synthetic records: a row per unit with its label, Figure 3, files."""

import os
import subprocess
import sys

import pytest

from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import report
from scripts import detail_tables
from scripts import run_table

import helpers

_STEPS = (0, 20, 40)


def _unit(task, T, model, seed=0, **settings):
  name = f"{task} T={T} {model}" + "".join(f" {k}={v}" for k, v in sorted(settings.items()))
  return name, f"{name.replace(' ', '_')}-s{seed}"


def _unit_records(task, T, model, *, final_loss, replicates=2, seed=0, finished=True,
                  **settings):
  """'val' records at _STEPS and (when finished) a 'final' per replicate; the unit."""
  name, uid = _unit(task, T, model, seed, **settings)
  fields = dict(unit=uid, unit_name=name, task=task, model=model, T=T, hidden_size=8,
                beta=1.0, activation="relu", h0="zeros", lambda_init="uniform",
                lambda_init_std=1.0, lambda_optimizer="sgd", learning_rate=1e-3,
                lambda_learning_rate=1e-3, lr_drops=[], lr_drop_factor=0.1,
                batch_size=20, num_replicates=replicates, seed=seed)
  fields.update(settings)
  recs = []
  for rep in range(replicates):
    for i, step in enumerate(_STEPS):
      val = 1.0 / (i + 1) * final_loss * 3 + 0.01 * rep
      rec = dict(fields, kind="val", replicate=rep, step=step, val_loss=val, seconds=step)
      if step:
        rec["train_loss"] = val * 1.1
      recs.append(rec)
    if finished:
      recs.append(dict(fields, kind="final", replicate=rep, step=_STEPS[-1],
                       val_loss=final_loss + 0.01 * rep, test_loss=final_loss + 0.02 * rep,
                       seconds=12.0))
  return recs, (name, uid)


def _add_launch(wd, number, unit_records):
  helpers.write_launch(wd, number, [u for _, u in unit_records], family="rnn")
  workdir_lib.append_records(os.path.join(wd, "results.jsonl"),
                         [r for recs, _ in unit_records for r in recs])


def _all_models():
  return [
      _unit_records("adding", 10, "gurnn", final_loss=0.05, activation="modrelu",
                    lambda_init="phases", lambda_optimizer="rmsprop"),
      _unit_records("adding", 10, "gurnn_beta", final_loss=0.01),
      _unit_records("adding", 10, "urnn", final_loss=0.03),
      _unit_records("adding", 10, "lstm", final_loss=2e-4),
      _unit_records("adding", 10, "irnn", final_loss=0.0146),
      _unit_records("adding", 10, "tanh", final_loss=0.16),
      _unit_records("memory", 10, "gurnn_beta", final_loss=0.1),
  ]


def _rows(text):
  return [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]


def test_a_row_per_model_with_its_label():
  recs = [r for rs, _ in _all_models() for r in rs]
  text = report.markdown(recs)
  assert "### adding, T = 10 (random baseline 0.1667; sets of ? sequences)" in text
  assert "### memory, T = 10 (random baseline 0.6931; sets of ? sequences)" in text
  for label in ("guRNN_β", "ruRNN", "LSTM", "IRNN", "tanh RNN"):
    assert f"| {label} | — | 0 | 2 |" in text, text
  assert "| guRNN₁ (modReLU, phases init, λ: RMSProp) | — | 0 | 2 |" in text
  lstm = next(r for r in _rows(text) if r.startswith("| LSTM |"))
  # setting, seeds, runs, median / best final val, median test, no original number at
  # T = 10, steps, seconds
  assert lstm == "| LSTM | — | 0 | 2 | 0.0052 | 0.0002 | 0.0102 | — | 40 | 12 |", lstm


def test_original_runs_at_T100():
  recs, _ = _unit_records("adding", 100, "gurnn_beta", final_loss=0.02)
  row = next(r for r in _rows(report.markdown(recs)) if r.startswith("| guRNN_β |"))
  assert "| 0.01 |" in row  # the original code's logged final validation loss


def test_unfinished_units_show_the_last_subsample_validation():
  recs, _ = _unit_records("adding", 10, "lstm", final_loss=0.3, finished=False)
  row = next(r for r in _rows(report.markdown(recs)) if r.startswith("| LSTM"))
  assert row.startswith("| LSTM (unfinished, subsample) | — | 0 | 2 | 0.305 | 0.3 | — |"), row


def test_settings_of_one_model_are_rows_that_name_what_differs_and_seeds_pool():
  a, _ = _unit_records("adding", 10, "lstm", final_loss=0.3, learning_rate=1e-3)
  b, _ = _unit_records("adding", 10, "lstm", final_loss=0.2, learning_rate=1e-2)
  b1, _ = _unit_records("adding", 10, "lstm", final_loss=0.4, learning_rate=1e-2, seed=1)
  rows = [r for r in _rows(report.markdown(a + b + b1)) if r.startswith("| LSTM")]
  assert rows == ["| LSTM | learning_rate=0.001 | 0 | 2 | 0.305 | 0.3 | 0.31 | — | 40 | 12 |",
                  "| LSTM | learning_rate=0.01 | 0, 1 | 4 | 0.305 | 0.2 | 0.31 | — | 40 | 12 |"]


def test_a_record_written_twice_counts_once():
  recs = [r for rs, _ in _all_models() for r in rs]
  assert report.markdown(recs + recs[-4:]) == report.markdown(recs)


def test_figures_per_task_and_T():
  recs = [r for rs, _ in _all_models() for r in rs]
  from matplotlib.figure import Figure  # here: matplotlib's import slows every worker
  figs = report.figures(recs)
  assert set(figs) == {"figure3_adding_T10", "figure3_memory_T10"}
  assert all(isinstance(f, Figure) for f in figs.values())
  ax = figs["figure3_adding_T10"].axes[0]
  labels = ax.get_legend_handles_labels()[1]
  # The paper's order of the models, then the baseline.
  assert labels == ["guRNN₁ (modReLU, phases init, λ: RMSProp)", "guRNN_β", "ruRNN", "LSTM",
                    "IRNN", "tanh RNN", "random baseline"]
  median = next(line for line in ax.get_lines() if line.get_label() == "LSTM")
  assert list(median.get_xdata()) == list(_STEPS)
  assert list(median.get_ydata()) == pytest.approx([6e-4 + 0.005, 3e-4 + 0.005, 2e-4 + 0.005])


def test_figure3_from_several_launches_and_a_second_seed(tmp_path):
  wd = str(tmp_path)
  models = _all_models()
  _add_launch(wd, 1, models[:4])  # gurnn, gurnn_beta, urnn, lstm
  _add_launch(wd, 2, models[4:6])  # irnn, tanh
  rerun = _unit_records("adding", 10, "lstm", final_loss=7.0, seed=1)
  _add_launch(wd, 3, [rerun])  # the LSTM again with another seed: one row, 4 runs
  paths = report.write_report(wd)
  assert paths == [os.path.join(wd, "report.md"), os.path.join(wd, "figure3_adding_T10.png")]
  assert os.path.getsize(paths[1]) > 1000
  text = open(paths[0], encoding="utf-8").read()
  for label in ("guRNN_β", "ruRNN", "IRNN", "tanh RNN"):
    assert f"| {label} | — | 0 | 2 |" in text
  lstm = [r for r in _rows(text) if r.startswith("| LSTM")]
  assert len(lstm) == 1 and lstm[0].startswith("| LSTM | — | 0, 1 | 4 | 3.505 |"), lstm
  assert "![adding, T = 10](figure3_adding_T10.png)" in text
  assert "memory" not in text  # never launched here


def test_write_report_with_given_records(tmp_path):
  recs, _ = _unit_records("memory", 10, "urnn", final_loss=0.1)
  paths = report.write_report(str(tmp_path), recs)
  assert paths == [str(tmp_path / "report.md"), str(tmp_path / "figure3_memory_T10.png")]
  assert "| ruRNN | — | 0 | 2 |" in (tmp_path / "report.md").read_text(encoding="utf-8")


def test_frames_work_like_lists(tmp_path):
  pytest.importorskip("pandas")
  from lie_unitary.experiments import workdir as workdir_lib
  _add_launch(str(tmp_path), 1, _all_models())
  df = workdir_lib.load_results(str(tmp_path), as_frame=True)
  assert report.markdown(df) == report.markdown(
      workdir_lib.load_results(str(tmp_path), as_frame=False))
  assert set(report.figures(df)) == {"figure3_adding_T10", "figure3_memory_T10"}


_NOTEBOOK = """
import sys
import matplotlib
matplotlib.use("svg")
from lie_unitary.experiments.rnn import report
from scripts import run_table
paths = report.write_report(sys.argv[1])
assert matplotlib.get_backend() == "svg", matplotlib.get_backend()
assert "matplotlib.pyplot" not in sys.modules
print(len(paths))
"""


@pytest.mark.slow
def test_write_report_leaves_the_backend_alone(tmp_path):
  _add_launch(str(tmp_path), 1, _all_models())
  out = subprocess.run([sys.executable, "-c", _NOTEBOOK, str(tmp_path)], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": helpers.ROOT,
                                       "JAX_PLATFORMS": "cpu"},
                       check=False)
  assert out.returncode == 0, out.stderr
  assert out.stdout.strip() == "3"


def test_the_report_names_the_sets_size_and_a_short_run():
  recs, _ = _unit_records("adding", 100, "gurnn", final_loss=0.1, eval_size=2000)
  text = report.markdown(recs)
  assert "### adding, T = 100 (random baseline 0.1667; sets of 2,000 sequences)" in text
  assert "A short run (40 updates at most" in text  # _STEPS end at 40
  long = [dict(r, step=50_000) if r["kind"] == "final" else r for r in recs]
  assert "short run" not in report.markdown(long)


def test_the_image_figure_draws_the_finished_runs_beside_a_running_one():
  # Replicate 0 finished at epoch 2, replicate 1 has only its step-0 evaluation.
  recs = helpers.image_records("gurnn", [[0.1, 0.70, 0.80], [0.1]])
  recs.append(dict(recs[2], kind="final"))
  by_epoch = report.figures(recs)["images_permuted_fashion_mnist"].axes[0]
  line, = by_epoch.lines
  assert list(line.get_ydata()) == pytest.approx([9.0, 69.0, 79.0])  # validation: test − 1
  assert line.get_label() == "guRNN (modReLU)"


def test_the_drift_table_gives_each_epochs_mean_and_standard_error():
  recs = helpers.image_records("gurnn", [[0.1, 0.70], [0.1, 0.74]])
  recs += helpers.image_records("lstm", [[0.1, 0.5], [0.1, 0.5]])
  for r in recs:
    if r["model"] == "gurnn":
      r["u_drift"] = 0.1 * r["epoch"] + 0.02 * r["replicate"]
  text = "\n".join(detail_tables.rnn_lines(recs))
  assert "‖U − U₀‖" not in report.markdown(recs)  # a table of the script, not the report
  table = text[text.index("‖U − U₀‖_F / √n (0 at"):]
  rows = _rows(table)
  assert rows[0] == "| epoch | guRNN (modReLU) |"  # the LSTM records none
  # Epoch 1: 0.1 and 0.12: mean 0.11, standard error |a − b| / 2 = 0.01.
  assert rows[1:3] == ["| 0 | 0.0100 ± 0.0100 |", "| 1 | 0.1100 ± 0.0100 |"]
  assert "‖U − U₀‖" not in "\n".join(
      detail_tables.rnn_lines(helpers.image_records("lstm", [[0.1, 0.5]])))


def test_an_unfinished_image_unit_shows_its_best_so_far():
  # Validation accuracy is test − 0.01: replicate 0 peaks at epoch 1, replicate 1 at 2.
  recs = helpers.image_records("orthogonal", [[0.1, 0.80, 0.75], [0.1, 0.70, 0.74]])
  row, = [r for r in _rows(report.markdown(recs)) if r.startswith("| orthogonal")]
  # best val (0.79, 0.73), test there (0.80, 0.74), best test (0.80, 0.74), 20 s.
  assert row.endswith("| 0 | 2 | 2 (unfinished) | 76.00 ± 3.00 | 77.00 ± 3.00 | 77.00 ± 3.00 "
                      "| 20 |"), row


def test_a_row_with_finished_and_running_runs_gives_the_finished_ones_and_counts_the_rest():
  # Replicate 0 finished at epoch 2 (its final record), replicate 1 is at epoch 1.
  recs = helpers.image_records("orthogonal", [[0.1, 0.80, 0.75], [0.1, 0.70]])
  recs.append(dict(recs[0], kind="final", step=858, epoch=2.0, num_params=16415))
  row, = [r for r in _rows(report.markdown(recs)) if r.startswith("| orthogonal")]
  # Replicate 0 alone: best val 0.79 at epoch 1, test 0.80 there, best test 0.80, 20 s.
  assert row.endswith("| 16,415 | 0 | 1 | 2; 1 more running, epoch 1 | 79.00 | 80.00 | 80.00 "
                      "| 20 |"), row


def test_an_image_unit_evaluated_at_step_0_only_has_a_row():
  recs = helpers.image_records("gurnn", [[0.1]])  # a run just started: its initial evaluation
  row, = [r for r in _rows(report.markdown(recs)) if r.startswith("| guRNN")]
  assert "| 0 | 1 | 0 (unfinished) | — | — | — | — |" in row, row


def test_image_tables_give_every_epoch_and_the_pytorch_reference(tmp_path):
  recs = helpers.image_records("orthogonal", [[0.1, 0.70, 0.80], [0.1, 0.74, 0.78]])
  # The reference, two seeds; its dataset given as a folder, and a record of another task.
  ref = [dict(seed=s, epoch=e, task="permuted", dataset="/data/fashion_mnist/", hidden=170,
              val_accuracy=v, test_accuracy=t, seconds=100.0 * e)
         for s, e, v, t in ((0, 1, 0.75, 0.76), (0, 2, 0.74, 0.79),
                            (1, 1, 0.70, 0.71), (1, 2, 0.72, 0.73))]
  ref.append(dict(ref[0], task="pixel", test_accuracy=0.11))
  workdir_lib.append_records(tmp_path / "results.jsonl", recs)
  workdir_lib.append_records(tmp_path / report.REFERENCE, ref)
  report.write_report(str(tmp_path), recs)
  rows = _rows((tmp_path / "report.md").read_text())
  # Per seed the best validation epoch (seed 0: epoch 1; seed 1: epoch 2): its test
  # accuracy; and the best test accuracy of each seed; mean ± s.e. of two: (a+b)/2 ± |a-b|/2.
  assert "| PyTorch expRNN reference | — | 170 | — | 0, 1 | 2 | 2 | 73.50 ± 1.50 | " \
         "74.50 ± 1.50 | 76.00 ± 3.00 | 200 |" in rows
  # The script's test accuracy at every epoch: ours and the reference's.
  epochs = _rows("\n".join(detail_tables.rnn_lines(recs, ref)))
  assert "| 0 | 10.00 ± 0.00 | — |" in epochs
  assert "| 1 | 72.00 ± 2.00 | 73.50 ± 2.50 |" in epochs
  assert "| 2 | 79.00 ± 1.00 | 76.00 ± 3.00 |" in epochs
  assert "11.00" not in "\n".join(rows)  # the pixel task's record is not this task's
  # The published table: size, epochs, protocol and source beside each number.
  text = (tmp_path / "report.md").read_text()
  assert "70 epochs, batch 128, RMSProp, all 60,000 training images (no validation split)" in text
  assert "| expRNN | 170 | 16K | 98.0 | 94.9 | Lezcano-Casado & Martínez-Rubio 2019 " \
         "(expRNN), its MNIST table [1] |" in rows
  assert "| asRNN | 257 | 69K | 99.21 | 96.88 | asRNN (an orthogonal recurrence with a " \
         "learned saturation, 2023) [2] |" in rows
  assert "[1] Read from a copy: the README of the asRNN repository" in text
  assert "[2] Read from the README of the asRNN repository" in text  # and its own protocol:
  assert "not checked against the asRNN paper. Protocol: as its README gives it" in text
  # The figure draws the reference's median validation accuracy over seeds per epoch.
  fig = report.figures(recs, ref)["images_permuted_fashion_mnist"]
  line, = [ln for ln in fig.axes[0].lines if ln.get_label() == "PyTorch expRNN reference"]
  assert list(line.get_xdata()) == [1, 2]
  assert list(line.get_ydata()) == pytest.approx([72.5, 73.0])  # the mean over seeds
  # Without a reference file: no reference row or column.
  os.remove(tmp_path / report.REFERENCE)
  report.write_report(str(tmp_path), recs)
  assert "PyTorch" not in (tmp_path / "report.md").read_text()


def test_every_reference_file_is_read_and_a_short_epoch_is_a_fraction_of_ours(tmp_path):
  recs = helpers.image_records("orthogonal", [[0.1, 0.70, 0.80]])
  full = dict(seed=0, epoch=1, task="permuted", dataset="fashion_mnist", hidden=170,
              val_accuracy=0.75, test_accuracy=0.76, seconds=100.0)
  workdir_lib.append_records(tmp_path / report.REFERENCE, [full])
  # A run of 300 updates ("epoch" 1 of 300 updates) in a file of its own.
  workdir_lib.append_records(tmp_path / "torch_first_300.jsonl",
                             [dict(full, updates_per_epoch=300, test_accuracy=0.60)])
  workdir_lib.append_records(tmp_path / "not_torch.jsonl", [dict(full, test_accuracy=0.5)])
  ref = report.read_reference(str(tmp_path))
  assert [r["test_accuracy"] for r in ref] == [0.6, 0.76]  # torch_* files, in name order
  rows = _rows(report.markdown(recs, reference=ref))
  # 300 of the 429 updates of an epoch of 55,000 images in batches of 128: epoch 0.6993.
  assert "| PyTorch expRNN reference | updates_per_epoch=300 | 170 | — | 0 | 1 | 0.6993 | " \
         "75.00 | 60.00 | 60.00 | 100 |" in rows
  assert "| PyTorch expRNN reference | updates_per_epoch=— | 170 | — | 0 | 1 | 1 | 75.00 | " \
         "76.00 | 76.00 | 100 |" in rows


def test_the_block_table_averages_each_runs_epochs_then_the_runs():
  md = lambda recs, **kw: "\n".join(detail_tables.rnn_lines(recs, **kw))  # noqa: E731
  # Replicate 0: test accuracy 0.5 + epoch/100 at epochs 0-20; replicate 1: 0.4 + epoch/100
  # up to epoch 15 (unfinished: it has finished the first block only).
  recs = helpers.image_records("gurnn", [[0.5 + e / 100 for e in range(21)],
                                  [0.4 + e / 100 for e in range(16)]])
  text = md(recs)
  table = _rows(text[text.index("averaged over blocks of 10 epochs"):])
  assert table[0] == "| epochs | guRNN (modReLU) |"
  # Block 1-10: run means 0.555 and 0.455 (epoch 0 is outside every block): 50.50 ± 5.00.
  # Block 11-20: replicate 0 alone, mean of epochs 11-20 = 0.655.
  assert table[1:3] == ["| 1-10 | 50.50 ± 5.00 |", "| 11-20 | 65.50 (1 of 2) |"]
  assert table[3].startswith("| epoch |")  # the next table: nothing past epoch 20
  # The PyTorch reference is a column of its own, its epochs its records'.
  ref = [dict(seed=0, epoch=e, task="permuted", dataset="fashion_mnist", hidden=170,
              val_accuracy=0.7, test_accuracy=0.7 + e / 1000, seconds=e) for e in range(1, 21)]
  text = md(recs, reference=ref)
  table = _rows(text[text.index("averaged over blocks of 10 epochs"):])
  assert table[0] == "| epochs | guRNN (modReLU) | PyTorch expRNN reference |"
  assert table[1:3] == ["| 1-10 | 50.50 ± 5.00 | 70.55 |",
                        "| 11-20 | 65.50 (1 of 2) | 71.55 |"]
  # Ten epochs or fewer (one block): no table.
  short = helpers.image_records("gurnn", [[0.5 + e / 100 for e in range(11)]])
  assert "averaged over blocks" not in md(short)


def test_the_run_script_gives_each_runs_best_epochs():
  # Replicate 0 (finished): validation peaks at epoch 12 (0.80, again at 15: the first
  # counts), test peaks at epoch 18 (0.90). Replicate 1 (running, epoch 20): flat 0.5.
  val0 = [0.5] * 21
  val0[12] = val0[15] = 0.80
  test0 = [0.6] * 21
  test0[12], test0[18] = 0.70, 0.90
  recs = helpers.image_records("gurnn", [[0.5] * 21, [0.5] * 21])
  for r in recs:
    if r["replicate"] == 0:
      e = int(r["epoch"])
      r.update(val_accuracy=val0[e], test_accuracy=test0[e], u_drift=0.01 * e)
  recs.append(dict(recs[20], kind="final", step=429 * 20))
  table = _rows("\n".join(run_table.lines(recs)))
  assert table[0].startswith("| model | seed | replicate | epochs | best val | at epoch |")
  assert table[1] == ("| guRNN (modReLU) | 0 | 0 | 20 | 80.00 | 12 | 70.00 | 90.00 | 18 "
                      "| 0.2000 | 200 |")
  # Ties pick the first epoch after step 0 (val 0.49 everywhere: epoch 1).
  assert table[2] == ("| guRNN (modReLU) | 0 | 1 | 20 (running) | 49.00 | 1 | 50.00 | 50.00 "
                      "| 1 | — | 200 |")


def test_the_loss_block_tables_average_the_recorded_losses_without_scaling():
  md = lambda recs, **kw: "\n".join(detail_tables.rnn_lines(recs, **kw))  # noqa: E731
  # Training loss 1 / epoch and validation loss 0.1 · replicate + 2 / epoch (epochs 1-20),
  # the PyTorch reference's records have neither: it gets no column in the loss tables.
  recs = helpers.image_records("gurnn", [[0.5] * 21, [0.5] * 21])
  for r in recs:
    if r["epoch"] > 0:
      r["train_loss"] = 1 / r["epoch"]
      r["val_loss"] = 0.1 * r["replicate"] + 2 / r["epoch"]
  ref = [dict(seed=0, epoch=e, task="permuted", dataset="fashion_mnist", hidden=170,
              val_accuracy=0.7, test_accuracy=0.7, seconds=e) for e in range(1, 21)]
  text = md(recs, reference=ref)
  h = lambda a, b: sum(1 / e for e in range(a, b + 1)) / (b - a + 1)  # noqa: E731
  train = _rows(text[text.index("Training loss (each epoch's mean over its batches) averaged"):])
  assert train[0] == "| epochs | guRNN (modReLU) |"
  assert train[1:3] == [f"| 1-10 | {h(1, 10):.3f} ± 0.000 |",
                        f"| 11-20 | {h(11, 20):.3f} ± 0.000 |"]
  val = _rows(text[text.index("Validation loss (the validation split) averaged"):])
  # Two replicates 0.1 apart: mean + 0.05, standard error 0.05.
  assert val[1:3] == [f"| 1-10 | {2 * h(1, 10) + 0.05:.3f} ± 0.050 |",
                      f"| 11-20 | {2 * h(11, 20) + 0.05:.3f} ± 0.050 |"]
  # Records without losses (the accuracy-only units above): no loss tables.
  assert "Training loss" not in md(helpers.image_records("gurnn", [[0.5] * 21]))


def _pair_records(gurnn, orthogonal, epochs=20):
  """A guRNN and an orthogonal RNN unit, one constant test accuracy per replicate (epochs
  1-`epochs`; a replicate given as (accuracy, last epoch) stops early)."""
  recs = []
  for model, accs in (("gurnn", gurnn), ("orthogonal", orthogonal)):
    last = [a[1] if isinstance(a, tuple) else epochs for a in accs]
    accs = [a[0] if isinstance(a, tuple) else a for a in accs]
    recs += helpers.image_records(model, [[0.1] + [a] * e for a, e in zip(accs, last)])
  return recs


def test_the_gap_table_gives_the_gurnns_lead_in_combined_standard_errors():
  # guRNN runs 0.90 and 0.88 (mean 0.89, s.e. 0.01), orthogonal 0.86 and 0.86 (s.e. 0):
  # the gap 3.00 ± 1.00, 3.0 standard errors. The orthogonal RNN's second replicate stops
  # at epoch 15: block 11-20 has one run of it, so no gap there.
  recs = _pair_records([0.90, 0.88], [0.86, (0.86, 15)])
  recs += helpers.image_records("lstm", [[0.1] + [0.5] * 20, [0.1] + [0.6] * 20])
  for r in recs:  # training loss: guRNN 0.2, 0.2; orthogonal 0.35, 0.25 (0.30 ± 0.05)
    r["train_loss"] = {"gurnn": 0.2, "orthogonal": 0.35 - 0.1 * r["replicate"]}.get(r["model"])
  text = "\n".join(detail_tables.rnn_lines(recs))
  rows = _rows(text[text.index("guRNN − orthogonal RNN over blocks"):])
  assert rows[0] == "| epochs | test accuracy (%) | training loss | validation loss | runs |"
  assert rows[1] == "| 1-10 | +3.00 ± 1.00 (+3.0) | -0.100 ± 0.050 (-2.0) | — | 2, 2 |"
  assert rows[2].startswith("| epoch |")  # the next table: no line for block 11-20
  # Two settings of one model: which pair is meant is not known, so no table.
  other = [dict(r, rmsprop_decay=0.99) for r in recs if r["model"] == "orthogonal"]
  for r in other:
    r["unit"] += "-b"
  assert "guRNN − orthogonal RNN over blocks" not in "\n".join(
      detail_tables.rnn_lines(recs + other))


def test_two_folders_gaps_side_by_side_and_their_difference(tmp_path):
  # 16K: 3.00 ± 1.00 as above; 69K: guRNN 0.87, 0.86, orthogonal 0.855 both: 1.00 ± 0.50.
  # The difference 1.00 − 3.00 = −2.00 ± √(1.00² + 0.50²) = 1.12, −1.8 standard errors.
  for name, recs in (("s16k", _pair_records([0.90, 0.88], [0.86, 0.86], epochs=10)),
                     ("s69k", _pair_records([0.87, 0.86], [0.855, 0.855]))):
    workdir_lib.append_records(tmp_path / name / "results.jsonl", recs)
  folders = [str(tmp_path / "s16k"), str(tmp_path / "s69k")]
  rows = _rows("\n".join(detail_tables.sizes_lines(folders)))
  assert rows[0] == f"| epochs | {folders[0]} | {folders[1]} | {folders[1]} − {folders[0]} |"
  assert rows[1] == "| 1-10 | +3.00 ± 1.00 (+3.0) | +1.00 ± 0.50 (+2.0) | -2.00 ± 1.12 (-1.8) |"
  assert rows[2] == "| 11-20 | — | +1.00 ± 0.50 (+2.0) | — |"
  assert detail_tables.sizes_lines(folders[:1]) == []  # one folder: nothing to compare
