"""The RNN family's report: Figure 3 and a loss table for the adding and memory problems
(paper §4), accuracy tables and curves for the sequential-image tasks.

`figures` and `markdown` take the records (`workdir.load_results`), for notebooks as for
files; figures are built without pyplot, leaving the caller's matplotlib state alone. A
row is a current unit (all its replicates). Where WORKDIR/torch_reference.jsonl holds the
PyTorch reference's records (`python -m benchmarks torch_reference --out=...`), an image
task shows the reference beside our models.
"""

from __future__ import annotations

import collections
import os
from typing import Any
from typing import Sequence

import numpy as np

from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import data

__all__ = ["ANCHORS", "ORIGINAL_FINAL_VAL", "REFERENCE", "figures", "markdown",
           "write_report"]

# The PyTorch reference's records in a workdir (benchmarks torch_reference's --out).
REFERENCE = "torch_reference.jsonl"
_REFERENCE_LABEL = "PyTorch expRNN reference"

# Final validation losses of the original code's logged runs at T = 100.
ORIGINAL_FINAL_VAL = {
    ("adding", "gurnn_beta"): 0.0100, ("adding", "lstm"): 2.4e-4,
    ("adding", "irnn"): 0.0146, ("adding", "urnn"): 0.031,
    ("memory", "gurnn_beta"): 0.0058, ("memory", "urnn"): 1.3e-8,
    ("memory", "lstm"): 0.173, ("memory", "irnn"): 0.173,
}
# Published test accuracies (%) on MNIST, best test epoch, 70 epochs of RMSProp at
# batch 128: (model, hidden units, parameters) -> (sMNIST, psMNIST).
ANCHORS = {
    ("expRNN (Lezcano-Casado & Martínez-Rubio 2019)", 170, "16K"): (98.0, 94.9),
    ("expRNN", 360, "69K"): (98.4, 96.2),
    ("expRNN", 512, "137K"): (98.7, 96.6),
    ("scoRNN (Helfrich et al. 2018)", 170, "16K"): (97.2, 94.8),
    ("scoRNN", 360, "69K"): (98.1, 95.9),
    ("scoRNN", 512, "137K"): (98.2, 96.5),
    ("LSTM (as the expRNN paper reports it)", 128, "69K"): (81.9, 79.5),
}
# Fewer updates than this: the report says the run is too short to learn.
_SHORT_RUN_UPDATES = 1_000
_LABELS = {"gurnn": "guRNN₁", "gurnn_beta": "guRNN_β", "urnn": "ruRNN", "lstm": "LSTM",
           "irnn": "IRNN", "tanh": "tanh RNN", "free": "free 2n×2n RNN"}
_IMAGE_LABELS = {"gurnn": "guRNN (modReLU)", "orthogonal": "orthogonal RNN (expRNN's)",
                 "lstm": "LSTM"}


def _label(r: dict) -> str:
  """A synthetic-task unit's label: its model and what its setting changes from the
  paper's guRNN (e.g. "guRNN₁ (modReLU, phases init, λ: RMSProp)")."""
  name = _LABELS.get(r["model"], r["model"])
  if not r["model"].startswith("gurnn"):
    return name
  notes = ["modReLU"] if r.get("activation") == "modrelu" else []
  if r.get("lambda_init") == "phases":
    notes.append("phases init")
  elif r.get("lambda_init_std") == 0:
    notes.append("U = I init")
  if r.get("lambda_optimizer") == "rmsprop":  # the configs' default is plain SGD on λ
    notes.append("λ: RMSProp")
  return name + (f" ({', '.join(notes)})" if notes else "")


def _units(records: Sequence[dict], images: bool) -> dict:
  """The "val" and "final" records of the synthetic (or `images`: the image) tasks as
  {(task, T) (images: (task, dataset)): {unit id: unit}}, a unit a dict of "model",
  "name", "hidden_size", "label", "batch_sizes", "val" {replicate: {step: record}} and
  "final" {replicate: record}; of a record written twice the last counts. A label two
  synthetic units of one (task, T) share gets the unit name appended."""
  out = collections.defaultdict(dict)
  for r in records:
    if r.get("kind") not in ("val", "final") or (r.get("task") in data.IMAGE_TASKS) != images:
      continue
    u = out[(r["task"], r.get("dataset", "?") if images else r["T"])].setdefault(r["unit"], {
        "model": r["model"], "name": r.get("unit_name", r["unit"]),
        "hidden_size": r.get("hidden_size"), "batch_sizes": set(),
        "label": _IMAGE_LABELS.get(r["model"], r["model"]) if images else _label(r),
        "order": (r["model"], "" if images else str(r.get("lambda_optimizer"))),
        "val": collections.defaultdict(dict), "final": {}})
    if "batch_size" in r:
      u["batch_sizes"].add(r["batch_size"])
    if r["kind"] == "val":
      u["val"][r["replicate"]][r["step"]] = r
    else:
      u["final"][r["replicate"]] = r
  for units in () if images else out.values():
    count = collections.Counter(u["label"] for u in units.values())
    for u in units.values():
      if count[u["label"]] > 1:
        u["label"] += f" [{u['name']}]"
  return {key: sorted(units.values(), key=lambda u: (*u["order"], u["label"], u["name"]))
          for key, units in sorted(out.items())}


def _fmt(x) -> str:
  return "—" if x is None else (f"{x:.4g}" if np.isfinite(x) else str(x))


def _loss_table(task: str, T: int, units: list) -> list[str]:
  lines = [f"### {task}, T = {T} (random baseline {data.get_task(task).baseline(T):.4g})", "",
           "| model | replicates | final val (median) | final val (best) | test (median) | "
           "original run (val) | steps | wall time (s) |", "|---|---|---|---|---|---|---|---|"]
  for u in units:
    finals = list(u["final"].values())
    # Records store NaN / inf as the strings 'nan' / 'inf', which float reads.
    if finals:
      val, test = ([float(r[k]) for r in finals] for k in ("val_loss", "test_loss"))
      cells = [np.median(val), np.min(val), np.median(test)]
      steps = max(r["step"] for r in finals)
      secs = max((r["seconds"] for r in finals if "seconds" in r), default=None)
    else:  # unfinished: the last subsample validation
      last = [float(c[max(c)]["val_loss"]) for c in u["val"].values() if c]
      cells = [np.median(last), np.min(last), None] if last else [None] * 3
      steps = max((max(c) for c in u["val"].values() if c), default=0)
      secs = None
    cells.append(ORIGINAL_FINAL_VAL.get((task, u["model"])) if T == 100 else None)
    lines.append(f"| {u['label']}{'' if finals else ' (unfinished, subsample)'} | "
                 f"{len(set(u['val']) | set(u['final']))} | {' | '.join(map(_fmt, cells))} | "
                 f"{steps} | {'—' if secs is None else f'{float(secs):.0f}'} |")
  return lines + [""]


def _cell(values) -> str:
  """Accuracies in % over replicates: mean ± standard error."""
  v = np.asarray([x for x in values if x is not None], np.float64) * 100
  if len(v) < 2:
    return f"{v[0]:.2f}" if len(v) else "—"
  return f"{v.mean():.2f} ± {v.std(ddof=1) / np.sqrt(len(v)):.2f}"


def _reference_runs(reference: Sequence[dict], task: str, dataset: str) -> dict:
  """{seed: {epoch: record}} of the PyTorch reference's records of `task` on `dataset`
  (a reference run's dataset may be the path of its folder: its last part counts)."""
  name = lambda d: os.path.basename(str(d).rstrip("/"))
  runs = collections.defaultdict(dict)
  for r in reference:
    if r.get("task") == task and name(r.get("dataset", "")) == name(dataset):
      runs[r["seed"]][r["epoch"]] = r
  return runs


def _best_cells(runs: Sequence[Sequence[dict]]) -> list[str]:
  """Over runs (each a run's validation records): the best validation accuracy, the
  test accuracy at that point and the best test accuracy, as table cells."""
  best = [max(run, key=lambda r: r["val_accuracy"]) for run in runs]
  return [_cell([r["val_accuracy"] for r in best]), _cell([r["test_accuracy"] for r in best]),
          _cell([max(r["test_accuracy"] for r in run) for run in runs])]


def _reference_row(runs: dict) -> str:
  """The main table's row of the reference: per seed, the best validation accuracy, the
  test accuracy at its epoch and the best test accuracy."""
  cells = _best_cells([list(run.values()) for run in runs.values()])
  hidden = {r.get("hidden") for run in runs.values() for r in run.values()}
  return (f"| {_REFERENCE_LABEL} | {'/'.join(map(str, sorted(hidden)))} | — | {len(runs)} "
          f"| {max(max(run) for run in runs.values())} | " + " | ".join(cells) +
          f" | {max(r['seconds'] for run in runs.values() for r in run.values()):.0f} |")


def _epoch_table(units: list, runs: dict) -> list[str]:
  """Test accuracy at every validation point: a row per epoch, a column per unit (and
  the reference, at the end of each of its epochs)."""
  def column(points):  # (epoch, record) -> {epoch: [test accuracies]}
    out = collections.defaultdict(list)
    for epoch, r in points:
      out[round(float(epoch), 3)].append(r.get("test_accuracy"))
    return out

  columns = [column((r.get("epoch", 0), r) for v in u["val"].values() for r in v.values())
             for u in units]
  labels = [u["label"] for u in units]
  if runs:
    columns.append(column(p for run in runs.values() for p in run.items()))
    labels.append(_REFERENCE_LABEL)
  epochs = sorted(set().union(*columns))
  lines = ["Test accuracy (%) at each validation point, mean ± s.e. over replicates:", "",
           "| epoch | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
  lines += [f"| {e:g} | " + " | ".join(_cell(c.get(e, [])) for c in columns) + " |"
            for e in epochs]
  return lines + [""]


def _accuracy_tables(records: Sequence[dict], reference: Sequence[dict] = ()) -> list[str]:
  """The image tasks' tables, then the published anchors (none without image records)."""
  groups = _units(records, images=True)
  if not groups:
    return []
  lines = []
  for (task, dataset), units in groups.items():
    runs = _reference_runs(reference, task, dataset)
    lines += [f"### {'pixel-by-pixel' if task == 'pixel' else 'permuted pixel-by-pixel'} "
              f"{dataset} (T = 784)", "",
              "Accuracy (%), mean ± s.e. over replicates: the best validation accuracy, the "
              "test accuracy at that point (selected on the validation split), and the "
              "best test accuracy over the run (the published anchors' protocol).", "",
              "| model | hidden | parameters | replicates | epochs | best val | test at best "
              "val | best test | wall time (s) |", "|---|---|---|---|---|---|---|---|---|"]
    for u in units:
      finals = list(u["final"].values())
      if finals:
        epochs, params = f"{finals[0].get('epoch', 0):g}", f"{int(finals[0]['num_params']):,}"
        row = [_cell([f[k] for f in finals])
               for k in ("best_val_accuracy", "test_accuracy", "best_test_accuracy")]
        row.append(f"{max(f['seconds'] for f in finals):.0f}")
      else:  # unfinished: the same columns over its validation points so far
        points = [list(v.values()) for v in u["val"].values() if v]
        last = [max(p, key=lambda r: r["step"]) for p in points]
        epochs = f"{last[0].get('epoch', 0):g} (unfinished)" if last else "0"
        params = "—"
        row = (_best_cells(points) if points else ["—"] * 3) + [
            f"{max(r['seconds'] for r in last):.0f}" if last else "—"]
      lines.append(f"| {u['label']} | {u['hidden_size']} | {params} | "
                   f"{len(finals) or len(u['val'])} | {epochs} | " + " | ".join(row) + " |")
    if runs:
      lines.append(_reference_row(runs))
    lines.append("")
    lines += _epoch_table(units, runs)
  column = 0 if all(task == "pixel" for task, _ in groups) else 1
  lines += [f"Published MNIST anchors ({('sMNIST', 'psMNIST')[column]}; 70 epochs, best test "
            "epoch; the runs above: their epochs column):", "",
            "| model | hidden | parameters | test accuracy (%) |", "|---|---|---|---|"]
  lines += [f"| {m} | {h} | {p} | {acc[column]} |" for (m, h, p), acc in ANCHORS.items()]
  return lines + [""]


def _loss_figure(task: str, T: int, units: list):
  from matplotlib.figure import Figure
  fig = Figure(figsize=(6.5, 4.2))
  ax = fig.subplots()
  for i, u in enumerate(units):
    curves = [sorted((s, float(r["val_loss"])) for s, r in c.items())
              for c in u["val"].values() if c]
    for c in curves:
      ax.plot([s for s, _ in c], [v for _, v in c], color=f"C{i}", alpha=0.25, lw=0.7)
    common = sorted(set.intersection(*(set(s for s, _ in c) for c in curves))) if curves else []
    if common:
      med = [np.median([dict(c)[s] for c in curves]) for s in common]
      ax.plot(common, med, color=f"C{i}", lw=1.5, label=u["label"])
  baseline = data.get_task(task).baseline(T)
  ax.axhline(baseline, color="k", ls=":", lw=1, label="random baseline")
  ax.set_yscale("log")
  # Keep divergent runs (the IRNN on memory reaches 1e15) from flattening the others.
  ax.set_ylim(top=min(ax.get_ylim()[1], 20 * baseline))
  batch_sizes = set().union(*(u["batch_sizes"] for u in units))
  ax.set_xlabel(f"steps (batches of {batch_sizes.pop()})" if len(batch_sizes) == 1
                else "steps")
  ax.set_ylabel("validation " + ("MSE" if task == "adding" else "cross-entropy"))
  ax.set_title(f"{task} problem, T = {T}")
  ax.legend(fontsize=8)
  fig.tight_layout()
  return fig


def _accuracy_figure(task: str, dataset: str, units: list, runs: dict):
  from matplotlib.figure import Figure
  fig = Figure(figsize=(10, 4))
  by_epoch, by_time = fig.subplots(1, 2)
  for i, u in enumerate(units):
    steps = sorted(set.intersection(*(set(v) for v in u["val"].values())))
    if not steps:
      continue
    rows = [[u["val"][r][s] for r in u["val"]] for s in steps]
    acc = [100 * np.median([x["val_accuracy"] for x in row]) for row in rows]
    label = f"{u['label']} ({u['hidden_size']})"
    by_epoch.plot([row[0].get("epoch", 0) for row in rows], acc, color=f"C{i}", label=label)
    by_time.plot([np.median([x["seconds"] for x in row]) for row in rows], acc,
                 color=f"C{i}", label=label)
  if runs:  # the reference's median over seeds at the end of each epoch
    epochs = sorted(set.intersection(*(set(run) for run in runs.values())))
    by_epoch.plot(epochs, [100 * np.median([run[e]["val_accuracy"] for run in runs.values()])
                           for e in epochs], color="k", ls="--", label=_REFERENCE_LABEL)
  for ax, x in ((by_epoch, "epochs"), (by_time, "wall-clock seconds (all replicates)")):
    ax.set_xlabel(x)
    ax.set_ylabel("validation accuracy (%)")
    ax.grid(alpha=0.3)
  by_epoch.legend(fontsize=8)
  fig.suptitle(f"{task} {dataset}")
  fig.tight_layout()
  return fig


def figures(results: Any, reference: Sequence[dict] = ()) -> dict:
  """The report's plots, as `matplotlib.figure.Figure` objects (save with ``fig.savefig``).

  Args:
    results: the records (a list of dicts or a DataFrame, as `load_results` returns them).
    reference: the PyTorch reference's records, drawn dashed beside the matching tasks.

  Returns:
    ``{"figure3_{task}_T{T}": Figure}``: validation loss (log scale) against steps, the
    median over replicates and every replicate faintly, the random baseline dotted;
    ``{"images_{task}_{dataset}": Figure}``: median validation accuracy against epochs
    and against wall-clock seconds.

  Raises:
    ValueError: a record names a task `lie_unitary.experiments.rnn.data` lacks.
  """
  records = workdir_lib.as_records(results)
  out = {f"figure3_{task}_T{T}": _loss_figure(task, T, units)
         for (task, T), units in _units(records, images=False).items()}
  out.update({f"images_{task}_{dataset.replace('/', '_')}": _accuracy_figure(
      task, dataset, u, _reference_runs(reference, task, dataset))
               for (task, dataset), u in _units(records, images=True).items()})
  return out


def markdown(results: Any, *, figure_files: dict | None = None,
             superseded: Sequence[tuple[str, str]] = (),
             reference: Sequence[dict] = ()) -> str:
  """The report's Markdown: a section per (task, T) or image task and dataset, a row per unit.

  Args:
    results: the records (a list of dicts or a DataFrame, as `load_results` returns them).
    figure_files: ``{figure key: file name}`` of figures saved beside the report; each
      gets an image link.
    superseded: ``(unit_name, unit_id)`` pairs a later launch replaced
      (`workdir.superseded_units`); listed in a note.
    reference: the PyTorch reference's records (seed, epoch, task, dataset, hidden,
      val_accuracy, test_accuracy, seconds).

  Returns:
    The text. A synthetic task's row: the median and best final validation loss, the
    median test loss, the original code's (T = 100), steps and wall time. An image
    task's row: hidden size, parameters, replicates, epochs, best validation accuracy,
    the test accuracy there and the best test accuracy; then the test accuracy at every
    validation point. An unfinished unit shows the same over its points so far.

  Raises:
    ValueError: a record names a task `lie_unitary.experiments.rnn.data` lacks.
  """
  figure_files = figure_files or {}
  records = workdir_lib.as_records(results)
  synthetic = [r for r in records if r.get("task") not in data.IMAGE_TASKS]
  sizes = sorted({int(r["eval_size"]) for r in records if "eval_size" in r})
  sets = (f"{' / '.join(f'{n:,}' for n in sizes)} sequences each" if sizes
          else "their sizes not recorded")
  lines = ["# RNN results", ""]
  if synthetic:
    lines += [f"Final losses on the full validation and test sets ({sets}; median and best "
              "over replicates); 'original run' is the final validation loss the original "
              "code's logged runs reached (T = 100 only).", ""]
  steps = [int(r["step"]) for r in synthetic if r.get("kind") == "final"]
  if steps and max(steps) < _SHORT_RUN_UPDATES:  # far less than the paper's 50,000 updates
    lines += [f"**A short run ({max(steps):,} updates at most, against the paper's 50,000): "
              "too short to learn these tasks; it checks that everything runs, and its "
              "losses are not results.**", ""]
  if superseded:
    lines += ["superseded: " + ", ".join(f"{name} ({uid})" for name, uid in superseded)
              + " (replaced by a later launch; left out).", ""]
  for (task, T), units in _units(records, images=False).items():
    lines += _loss_table(task, T, units)
    if f"figure3_{task}_T{T}" in figure_files:
      lines += [f"![{task}, T = {T}]({figure_files[f'figure3_{task}_T{T}']})", ""]
  lines += _accuracy_tables(records, reference)
  lines += [f"![{key}]({name})" for key, name in figure_files.items()
            if key.startswith("images_")]
  return "\n".join(lines)


def write_report(workdir: str, results: Any = None) -> list[str]:
  """Writes WORKDIR/report.md and a PNG per figure of `figures` (WORKDIR/{key}.png).

  Args:
    workdir: the experiment's working directory.
    results: the records; default: the current ones of WORKDIR/results.jsonl, with a
      note of the superseded units.

  Returns:
    The paths written: report.md first, then the PNGs.

  Raises:
    FileNotFoundError, ValueError: no results given and none current in the workdir.
  """
  superseded = []
  if results is None:
    results = workdir_lib.load_results(workdir, as_frame=False)
    superseded = workdir_lib.superseded_units(workdir)
  results = workdir_lib.as_records(results)
  reference = workdir_lib.read(workdir, REFERENCE)
  paths, files = [], {}
  for key, fig in figures(results, reference).items():
    paths.append(os.path.join(workdir, f"{key}.png"))
    fig.savefig(paths[-1], dpi=120)
    files[key] = f"{key}.png"
  report = workdir_lib.path(workdir, workdir_lib.REPORT)
  with open(report, "w", encoding="utf-8") as f:
    f.write(markdown(results, figure_files=files, superseded=superseded,
                     reference=reference))
  return [report] + paths
