"""The committed results are what their records give: every results/ report.md, and the
results page (docs/results.md) that gathers their tables."""

import os

import pytest

from lie_unitary.experiments import workdir
from lie_unitary.experiments.rnn import report
from scripts import results_page

import helpers

_RESULTS = os.path.join(results_page.ROOT, "results")


def _folders():
  """The RNN family's folders of results/ (the page gathers theirs; the other families'
  reports are checked by their own tests)."""
  return sorted(os.path.relpath(os.path.dirname(d), _RESULTS)
                for d, _, files in os.walk(_RESULTS) if d.endswith("launches") and files
                and all(la.get("family") == "rnn"
                        for la in workdir.read_launches(os.path.dirname(d))))


def test_every_results_folder_is_on_the_page():
  assert _folders() == sorted(folder for folder, _ in results_page.SECTIONS)


@pytest.mark.parametrize("folder", [f for f, _ in results_page.SECTIONS])
def test_each_report_is_what_its_records_give(folder):
  path = os.path.join(_RESULTS, folder)
  figures = {os.path.splitext(f)[0]: f for f in os.listdir(path) if f.endswith(".png")}
  text = report.markdown(workdir.load_results(path, as_frame=False), figure_files=figures,
                         reference=report.read_reference(path),
                         launches=workdir.read_launches(path))
  with open(os.path.join(path, "report.md"), encoding="utf-8") as f:
    assert f.read() == text, (f"results/{folder}/report.md is stale: python -m "
                              f"lie_unitary.experiments.rnn --workdir=results/{folder} "
                              "--report_only")


def test_the_results_page_is_what_the_records_give():
  with open(results_page.PAGE, encoding="utf-8") as f:
    assert f.read() == results_page.page(), "stale: python scripts/results_page.py"


def test_the_readme_tables_are_what_the_records_give():
  with open(results_page.README, encoding="utf-8") as f:
    text = f.read()
  assert text == results_page.readme(text), "stale: python scripts/results_page.py"


def test_the_readme_tables_need_their_markers():
  with pytest.raises(ValueError, match="70 epochs"):
    results_page.readme("# A README without the tables' markers\n")


def test_the_learned_basis_page_tables_are_what_the_records_give():
  with open(results_page.BASIS_DOC, encoding="utf-8") as f:
    text = f.read()
  assert text.count("<!-- results_page.py: ") == 8
  assert text == results_page.basis_doc(text), "stale: python scripts/results_page.py"


def test_the_reproduction_page_tables_are_what_the_records_give():
  with open(results_page.REPRODUCTION_DOC, encoding="utf-8") as f:
    text = f.read()
  assert text.count("<!-- results_page.py: operators_") == 11
  assert text == results_page.reproduction_doc(text), "stale: python scripts/results_page.py"


def test_the_rnn_page_table_is_what_the_records_give():
  with open(results_page.RNN_DOC, encoding="utf-8") as f:
    text = f.read()
  assert text == results_page.rnn_doc(text), "stale: python scripts/results_page.py"


def test_the_paper_tasks_table_gives_each_models_median_and_bolds_the_lowest(
    tmp_path, monkeypatch):
  import json
  folder = tmp_path / "results" / "memory_T100"
  folder.mkdir(parents=True)
  finals = {"gurnn_beta": [0.006, 0.002, 0.004], "lstm": [0.1733]}  # medians 0.004, 0.1733
  with open(folder / "results.jsonl", "w", encoding="utf-8") as f:
    for model, losses in finals.items():
      for i, loss in enumerate(losses):
        f.write(json.dumps(dict(kind="final", task="memory", T=100, model=model, seed=0,
                                replicate=i, step=50000, unit=f"{model}-u", val_loss=loss,
                                test_loss=loss)) + "\n")
  monkeypatch.setattr(results_page, "ROOT", str(tmp_path))
  monkeypatch.setattr(results_page, "PAPER_TASKS", (("memory", "memory_T100", "cmd"),))
  head, _, line = results_page.paper_tasks_table().splitlines()
  assert head.startswith("| task | T | random baseline | guRNN_β | guRNN₁ | LSTM |")
  cells = [c.strip() for c in line.strip("|").split("|")]
  # The memory baseline at T = 100: 10 ln 8 / (T + 20) = 0.1733; the original run: 0.0058.
  assert cells == ["memory", "100", "0.1733", "**0.004** (3)", "—", "0.1733 (1)", "—", "—",
                   "0.0058", "cmd"]


def test_a_report_splits_into_its_sections_at_every_heading_level():
  text = "# Title\n\nintro\n\n## A (x)\n\n| a |\n\n### B\n\nb\n## C\n"
  assert results_page._sections(text) == {"A (x)": "\n| a |\n\n", "B": "\nb\n", "C": ""}


def test_fill_replaces_each_marked_table_and_refuses_an_unknown_name():
  text = "a\n<!-- results_page.py: t -->\nold\n<!-- end -->\nb\n"
  assert results_page.fill(text, {"t": "| new |"}, "X") == text.replace("old", "| new |")
  with pytest.raises(ValueError, match="X: <!-- results_page.py: t --> names no table"):
    results_page.fill(text, {"u": ""}, "X")
  with pytest.raises(ValueError, match="no <!-- end --> after the t table"):
    results_page.fill(text.replace("<!-- end -->", ""), {"t": ""}, "X")


def test_a_readme_cell_averages_finished_runs_and_counts_the_running_ones():
  row = dict(best_test=[95.0, 94.0, 90.0], run_finished=[True, True, False],
             run_epoch=[70.0, 70.0, 22.0])
  # Finished: 95 and 94, mean 94.5, standard error |a − b| / 2 = 0.5; the third is running.
  assert results_page._cell(row, "best_test") == "94.50 ± 0.50 (2); 1 more running, epoch 22"
  row["run_finished"] = [True, True, True]
  assert results_page._cell(row, "best_test", bold=True) == "**93.00 ± 1.53** (3)"
  # None finished: the runs so far, at their epochs.
  row.update(run_finished=[False, False, False], run_epoch=[30.0, 31.0, 31.0])
  assert results_page._cell(row, "best_test") == "93.00 ± 1.53 (3), epoch 30–31 so far"
  assert results_page._cell(None, "best_test") == "not run yet"


def test_image_summary_gives_each_runs_accuracies_under_both_protocols():
  # Replicate 0: best validation at epoch 2 (val 0.79 > 0.77), its best test at epoch 2;
  # replicate 1: best validation at epoch 1, test there 0.74, best test 0.78 at epoch 2.
  recs = helpers.image_records("gurnn", [[0.1, 0.78, 0.80], [0.1, 0.74, 0.78]])
  recs[-1]["val_accuracy"] = 0.70  # replicate 1's epoch 2: worse on validation
  recs.append(dict(recs[2], kind="final", step=858))  # replicate 0 finished, 1 not
  (key, models), = results_page.image_summary(recs).items()
  assert key == ("permuted", "fashion_mnist")
  row = models["gurnn"]
  assert row["test_at_best_val"] == pytest.approx([80.0, 74.0])
  assert row["best_test"] == pytest.approx([80.0, 78.0])
  assert (row["seeds"], row["finished"], row["epoch"]) == ([0], False, 2.0)
  assert (row["run_finished"], row["run_epoch"]) == ([True, False], [2.0, 2.0])


def test_image_summary_refuses_two_settings_of_a_model():
  recs = helpers.image_records("lstm", [[0.1, 0.5]])
  recs += [dict(r, hidden_size=62) for r in helpers.image_records("lstm", [[0.1, 0.6]])]
  with pytest.raises(ValueError, match="several settings of one model"):
    results_page.image_summary(recs)


def test_an_argument_other_than_check_writes_nothing(capsys):
  assert results_page.main(["--chek"]) == 2  # a typo of --check rewrote every file
  assert "usage: python scripts/results_page.py [--check]; got --chek" in capsys.readouterr().err
