"""The committed results are what their records give: every results/ report.md, and the
results page (docs/results.md) that gathers their tables."""

import os

import pytest

from lie_unitary.experiments import workdir
from lie_unitary.experiments.rnn import report
from scripts import results_page

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
                         reference=workdir.read(path, report.REFERENCE))
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
