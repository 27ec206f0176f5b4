r"""Writes docs/results.md, the accuracy tables of every experiment kept in results/, the
README's tables of the sequential images and the paper's RNN tasks, and the tables of
docs/learned_basis.md, docs/reproduction.md and docs/rnn.md (each between its
`<!-- results_page.py: NAME -->` and `<!-- end -->` lines), made from the records by the
same code as their reports (tests/results_page_test.py checks that the page, these
tables and every report.md are what the records give).

  python scripts/results_page.py            # writes the page and the tables
  python scripts/results_page.py --check    # exit 1 when any is stale
"""

import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "results.md")
README = os.path.join(ROOT, "README.md")
BASIS_DOC = os.path.join(ROOT, "docs", "learned_basis.md")
REPRODUCTION_DOC = os.path.join(ROOT, "docs", "reproduction.md")
RNN_DOC = os.path.join(ROOT, "docs", "rnn.md")
# The operator-learning folders of results/ (paper §3), whose tables docs/reproduction.md shows.
OPERATORS = ("operators_table1", "operators_basis_change", "operators_one_epoch",
             "operators_orthogonal")
# The experiments of results/, in the page's order: (folder, heading).
SECTIONS = (
    ("psmnist_16k_70ep", "Permuted MNIST (psMNIST), the protocol's 70 epochs"),
    ("smnist_16k_70ep", "Pixel-by-pixel MNIST (sMNIST), the protocol's 70 epochs"),
    ("psmnist_16k", "Permuted MNIST (psMNIST), 10 epochs"),
    ("smnist_16k", "Pixel-by-pixel MNIST (sMNIST), 10 epochs"),
    ("sfashion_16k", "Pixel-by-pixel Fashion-MNIST, 10 epochs"),
    ("psfashion_16k", "Permuted Fashion-MNIST, the image configs of 2026-11-27"),
    ("memory_T100", "The memory problem, T = 100 (paper §4, Figure 3)"),
    ("adding_T100", "The adding problem, T = 100 (paper §4, Figure 3)"),
    ("ablations/phases", "Ablation: the guRNN's initial phases"),
    ("ablations/lstm", "Ablation: the image LSTM's settings"),
    ("ablations/torch_optimizer", "Ablation: PyTorch's RMSProp and readout"),
    ("ablations/expm", "Ablation: the orthogonal RNN's exponential, eigh or Padé"),
    ("ablations/rates", "Ablation: the orthogonal RNN's learning rate"),
    ("ablations/device_layout", "Ablation: one device or two per replicate"),
    ("ablations/first_300_updates", "Ablation: the first 300 updates"),
)
_INTRO = """# Results

Made by `python scripts/results_page.py` from the records in [results/](../results/README.md),
by the code that writes each folder's `report.md` (where the figures are; the tables over
epochs: `python scripts/detail_tables.py results/FOLDER`); edit neither by hand. Every "±"
is the standard error of the mean over the n runs of a row (ddof = 1; a run: one seed's
replicate; the seeds are listed). The sequential-image runs: 16K parameters, batches of
128. The two "70 epochs" sections run the field's whole
protocol on a 2-core Intel Xeon CPU, each unit's batch split over both cores (an
"(unfinished)" row shows its epochs so far); the other image sections, 10 of the 70
epochs on a 2-core AMD EPYC CPU. The paper's tasks (§4, Figure 3) ran on the Xeon with
its settings (batch 20, 50,000 updates). A row's setting names the
fields that tell it from the same model's other rows in its table. What was tried and
why: [design_decisions.md](design_decisions.md).

The paper's §3 (Tables 1-2, Figure 2, appendix B), from the records in `results/operators_*/`, is on
[reproduction.md](reproduction.md); the §4 tasks are discussed on [rnn.md](rnn.md).
"""


def section(folder: str) -> str:
  """One experiment's tables (no published table), headings one level down, from its
  records."""
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.rnn import report
  path = os.path.join(ROOT, "results", folder)
  text = report.markdown(workdir.load_results(path, as_frame=False),
                         anchors=False, reference=report.read_reference(path),
                         launches=workdir.read_launches(path))
  body = text.split("\n", 2)[2]  # after "# RNN results"
  return body.replace("\n### ", "\n#### ").replace("### ", "#### ", 1)


def page() -> str:
  from lie_unitary.experiments import report as common
  parts = [_INTRO]
  for folder, heading in SECTIONS:
    parts.append(f"## {heading}\n\n[results/{folder}/report.md](../results/{folder}/"
                 f"report.md)\n\n{section(folder).strip()}\n")
  parts.append("## Published\n\n" + "\n".join(common.published_table("mnist")).strip() + "\n")
  return "\n".join(parts)


def image_summary(results) -> dict:
  """The image tables in brief, for a summary elsewhere (the README's): each row's runs'
  test accuracies under both protocols.

  Args:
    results: the records (a list of dicts or a DataFrame, as `load_results` returns them).

  Returns:
    ``{(task, dataset): {model: row}}``, a row a dict: "seeds" (sorted list), "finished"
    (every run has its final record), "epoch" (the furthest epoch any run has validated
    at, a float), "test_at_best_val" and "best_test" (lists of floats, %, a run each:
    the test accuracy at its best validation point and its best test accuracy, the
    points after step 0); "run_finished" and "run_epoch" (lists aligned with those two:
    whether that run has its final record, and the furthest epoch it validated at). A run
    not yet validated after step 0 is left out of the four lists.

  Raises:
    ValueError: a table has more than one row (setting) of a model, so "the" model's row
      is ambiguous; or a record names a task `lie_unitary.experiments.rnn.data` lacks.
  """
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.rnn import report
  out = {}
  for key, rows in report.table_rows(workdir.as_records(results), images=True).items():
    models = [row["model"] for row in rows]
    if len(set(models)) < len(models):
      raise ValueError(f"image_summary: the {key[0]} {key[1]} table has several settings "
                       f"of one model ({sorted(models)}); summarise one setting per model")
    out[key] = {}
    for row in rows:
      points = [[r for s, r in sorted(run["val"].items()) if s > 0]
                for run in row["runs"].values()]
      best = [report.best(p) for p in points if p]
      done = [bool(run["final"]) for run, p in zip(row["runs"].values(), points) if p]
      out[key][row["model"]] = {
          "seeds": sorted(row["seeds"]),
          "finished": all(run["final"] for run in row["runs"].values()),
          "epoch": max((float(r.get("epoch", 0)) for p in points for r in p), default=0.0),
          "test_at_best_val": [100 * float(b["test_accuracy"]) for b, _ in best],
          "best_test": [100 * float(t) for _, t in best],
          "run_finished": done,
          "run_epoch": [max(float(r.get("epoch", 0)) for r in p) for p in points if p]}
  return out


# The README's tables: name -> (rows: (task label, folder, command cell or None), columns
# of accuracy: (heading, summary field), the published row beside ours: (model, params) of
# `published.json`'s MNIST table, or None). A folder's one row per model is summarised.
_MODELS = (("gurnn", "guRNN"), ("orthogonal", "orthogonal RNN (expRNN's)"), ("lstm", "LSTM"))
_PROTOCOLS = (("test at best val", "test_at_best_val"), ("best test over epochs", "best_test"))
README_TABLES = {
    "70 epochs": ((("permuted MNIST", "psmnist_16k_70ep", None),
                   ("pixel MNIST", "smnist_16k_70ep", None)), _PROTOCOLS, ("expRNN", "16K")),
    "10 epochs": ((("permuted MNIST", "psmnist_16k",
                    "`python -m lie_unitary.experiments.rnn --config=permuted_mnist "
                    "--config.data_dir=DIR --config.num_updates=4290 --cpu_devices=1 "
                    "--workdir=runs/psmnist_16k`"),
                   ("pixel MNIST", "smnist_16k",
                    "the same with `--config=pixel_mnist`, `--workdir=runs/smnist_16k`"),
                   ("pixel Fashion-MNIST", "sfashion_16k",
                    "the same with `--config=pixel_mnist --config.dataset=fashion_mnist`, "
                    "`--workdir=runs/sfashion_16k`")), _PROTOCOLS[:1], None),
}


def _cell(row: dict | None, field: str, bold: bool = False) -> str:
  """Mean ± standard error (n), or one run's value (1), over the row's finished runs, the
  value in bold if `bold`, then "; k more running, epoch E" for runs not finished; with no
  run finished, the same over the runs so far and ", epoch E so far" (E: the furthest, or
  "E1–E2" when the runs are at different epochs); "not run yet" for none."""
  if not row or not row[field]:
    return "not run yet"
  done = [v for v, f in zip(row[field], row["run_finished"]) if f]
  running = [e for e, f in zip(row["run_epoch"], row["run_finished"]) if not f]
  from lie_unitary.experiments import report as common
  values = done or row[field]
  text = common.pm(values, "{:.2f}".format)
  text = (f"**{text}**" if bold else text) + f" ({len(values)})"
  if not running:
    return text
  at = f"{min(running):g}" + (f"–{max(running):g}" if min(running) < max(running) else "")
  return (f"{text}; {len(running)} more running, epoch {at}" if done
          else f"{text}, epoch {at} so far")


def readme_table(name: str) -> str:
  """The README's table `name` (a key of README_TABLES), from the folders' records: a line
  per task and protocol, a column per model; the highest mean of a line in bold once
  two or more models have runs and all of them are finished."""
  from lie_unitary.experiments import report as common
  from lie_unitary.experiments import workdir
  rows, protocols, published = README_TABLES[name]
  commands = any(command for _, _, command in rows)
  head = ["task"] + (["accuracy"] if len(protocols) > 1 else []) + [m for _, m in _MODELS]
  head += [f"{published[0]}, published ({published[1]})"] if published else []
  head += ["command (DIR: the dataset's IDX files)"] if commands else []
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for task, folder, command in rows:
    summary = image_summary(workdir.load_results(os.path.join(ROOT, "results", folder),
                                                        as_frame=False))
    (key, models), = summary.items()  # one image table a folder
    for heading, field in protocols:
      ran = {m: models[m] for m, _ in _MODELS if m in models and models[m][field]}
      best = (max(ran, key=lambda m: np.mean(ran[m][field]))
              if len(ran) > 1 and all(r["finished"] for r in ran.values()) else None)
      cells = [_cell(models.get(m), field, bold=m == best) for m, _ in _MODELS]
      line = [task] + ([heading] if len(protocols) > 1 else []) + cells
      if published:
        anchor, = [r for r in common.published("mnist")[1]
                   if (r["model"], r["params"]) == published]
        line.append(str(anchor["psmnist" if key[0] == "permuted" else "smnist"])
                    if field == "best_test" else "—")
      lines.append("| " + " | ".join(line + ([command or ""] if commands else [])) + " |")
  return "\n".join(lines)


def fill(text: str, tables: dict, where: str, required=()) -> str:
  """`text` with each table between a `<!-- results_page.py: NAME -->` line and the next
  `<!-- end -->` made afresh from `tables[NAME]`.

  Raises:
    ValueError: a NAME of `required` has no such markers in `text` (`where` names the
      file), or a marker names no table of `tables`.
  """
  for name in required:
    if f"<!-- results_page.py: {name} -->\n" not in text:
      raise ValueError(f"{where} lacks the lines <!-- results_page.py: {name} --> and "
                       f"<!-- end --> around the {name} table")
  out, pos = [], 0
  for mark in re.finditer(r"<!-- results_page.py: (.+?) -->\n", text):
    name, end = mark.group(1), text.find("<!-- end -->", mark.end())
    if name not in tables:
      raise ValueError(f"{where}: {mark.group(0).strip()} names no table of {sorted(tables)}")
    if end < 0:
      raise ValueError(f"{where}: no <!-- end --> after the {name} table")
    out += [text[pos:mark.end()], tables[name].strip() + "\n"]
    pos = end
  return "".join(out) + text[pos:]


# The README's table of the paper's tasks (§4): (task label, folder, command cell), and
# its model columns.
PAPER_TASKS = (("memory (cross-entropy)", "memory_T100",
                "`python -m lie_unitary.experiments.rnn --config=memory --workdir=runs/memory`"),
               ("adding (MSE)", "adding_T100", "`--config=adding`"))
_PAPER_MODELS = ("gurnn_beta", "gurnn", "lstm", "irnn", "tanh")


def paper_tasks_table() -> str:
  """The README's table of the paper's tasks: a line per folder of PAPER_TASKS, a column per
  model of _PAPER_MODELS: the final validation loss, median over its runs (their count in
  parentheses), the lowest in bold; the random baseline's and the original code's logged
  run (the paper's guRNN_β) beside them.

  Raises:
    ValueError: a folder holds more than one task and T, or several settings of a model.
  """
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.rnn import data
  from lie_unitary.experiments.rnn import report
  head = (["task", "T", "random baseline"] + [report._LABELS[m] for m in _PAPER_MODELS]
          + ["the original code's run (guRNN_β)", "command"])
  lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for label, folder, command in PAPER_TASKS:
    tables = report.table_rows(workdir.load_results(os.path.join(ROOT, "results", folder),
                                                    as_frame=False), images=False)
    if len(tables) != 1:
      raise ValueError(f"results/{folder} holds {len(tables)} tasks; the table wants one")
    ((task, T), rows), = tables.items()
    median = {}
    for model in _PAPER_MODELS:
      runs = [row for row in rows if row["model"] == model]
      if len(runs) > 1:
        raise ValueError(f"results/{folder}: several settings of {model}")
      finals = [float(run["final"]["val_loss"]) for row in runs
                for run in row["runs"].values() if run["final"]]
      if finals:
        median[model] = (float(np.median(finals)), len(finals))
    low = min(median, key=lambda m: median[m][0], default=None)
    cells = [("**{:.4g}**" if m == low else "{:.4g}").format(median[m][0])
             + f" ({median[m][1]})" if m in median else "—" for m in _PAPER_MODELS]
    original = report._ORIGINAL.get((task, "gurnn_beta"))
    lines.append("| " + " | ".join(
        [label, str(T), f"{data.get_task(task).baseline(T):.4g}", *cells,
         "—" if original is None else f"{original:.4g}", command]) + " |")
  return "\n".join(lines)


def readme(text: str) -> str:
  """`text` (the README's) with its README_TABLES and "paper tasks" table made afresh
  (`fill`; each is required)."""
  tables = {name: readme_table(name) for name in README_TABLES}
  tables["paper tasks"] = paper_tasks_table()
  return fill(text, tables, "README.md", required=tables)


def _sections(text: str) -> dict[str, str]:
  """A report's sections by heading (every level below the title): {heading: its text up
  to the next heading}."""
  parts = re.split(r"^#{2,} (.+)\n", text, flags=re.M)[1:]
  return dict(zip(parts[::2], parts[1::2]))


def _titled(lines: list[str]) -> dict[str, str]:
  """`scripts/detail_tables.py`'s output by title: {a line that ends with ":", without it:
  the table or list below it}."""
  out, title = {}, None
  for line in lines:
    if line.endswith(":") and not line.startswith(("|", "- ")):
      title = line[:-1]
    elif line and title is not None:
      out[title] = out.get(title, "") + line + "\n"
  return out


def basis_tables() -> dict[str, str]:
  """results/learned_basis' tables by name: its report's sections by heading ("Targets
  (...)", "Against pairs (...)", ...) and "failures", `scripts/detail_tables.py`'s table of
  the replicates that did not recover the subalgebra."""
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.basis import report
  from scripts import detail_tables
  records = workdir.load_results(os.path.join(ROOT, "results", "learned_basis"), as_frame=False)
  return {**_sections(report.markdown(records)),
          "failures": "\n".join(detail_tables.basis_lines(records)[2:])}


def basis_doc(text: str) -> str:
  """`text` (docs/learned_basis.md's) with its tables made afresh (`fill`)."""
  return fill(text, basis_tables(), "docs/learned_basis.md")


def operators_tables() -> dict[str, str]:
  """The operator-learning folders' tables by name: "FOLDER: HEADING" for each section of
  its report (`lie_unitary.experiments.operators.report`) and "FOLDER: TITLE" for each of
  `scripts/detail_tables.py`'s tables (losses over the noise floor, SO(n) replicates in
  the wrong component, the closed-form baselines paired by replicate)."""
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.operators import report
  from scripts import detail_tables
  out = {}
  for folder in OPERATORS:
    records = workdir.load_results(os.path.join(ROOT, "results", folder), as_frame=False)
    out.update({f"{folder}: {heading}": body
                for heading, body in _sections(report.markdown(records)).items()})
    detail = detail_tables.operators_lines(records) + detail_tables.procrustes_lines(records)
    out.update({f"{folder}: {title}": body for title, body in _titled(detail).items()})
  return out


def reproduction_doc(text: str) -> str:
  """`text` (docs/reproduction.md's) with its tables made afresh (`fill`)."""
  return fill(text, operators_tables(), "docs/reproduction.md")


def rnn_doc(text: str) -> str:
  """`text` (docs/rnn.md's) with its "paper tasks" table made afresh (`fill`, required)."""
  return fill(text, {"paper tasks": paper_tasks_table()}, "docs/rnn.md",
              required=("paper tasks",))


def main(argv) -> int:
  if argv not in ([], ["--check"]):  # a typo of --check would rewrite the files
    print(f"usage: python scripts/results_page.py [--check]; got {' '.join(argv)}",
          file=sys.stderr)
    return 2
  new = {PAGE: page()}
  for path, make in ((README, readme), (BASIS_DOC, basis_doc),
                     (REPRODUCTION_DOC, reproduction_doc), (RNN_DOC, rnn_doc)):
    with open(path, encoding="utf-8") as f:
      new[path] = make(f.read())
  if "--check" in argv:
    stale = 0
    for path, text in new.items():
      with open(path, encoding="utf-8") as f:
        bad = f.read() != text
      stale |= bad
      print(f"{path}: {'stale: run python scripts/results_page.py' if bad else 'current'}")
    return int(stale)
  for path, text in new.items():
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
    print(f"wrote {path}")
  return 0


if __name__ == "__main__":
  sys.path.insert(0, ROOT)
  sys.exit(main(sys.argv[1:]))
