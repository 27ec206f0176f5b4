"""Figure-3-style plots and a Markdown table of the RNN runs (paper §4).

Built for notebooks as well as for files: `figures` returns one
`matplotlib.figure.Figure` per (task, T), built directly (no global figure manager, no
backend switch: the caller's matplotlib state is left alone), `markdown` returns the
table, and `write_report(workdir)` writes ``WORKDIR/figure3_{task}_T{T}.png``
(validation loss vs training steps: the median over replicates per model, every
replicate faintly, the random baseline dotted) and ``WORKDIR/report.md`` (final
full-validation and test losses per model beside the original code's logged runs).

Records (see `lie_unitary.experiments.workdir`): ``results.jsonl`` holds kind "val"
records (a validation point during training: val_loss, and train_loss for step > 0)
and kind "final" records (val_loss and test_loss on the full sets), each with its
``unit``, ``replicate``, ``step`` and the settings task, model, T, activation,
lambda_init, lambda_init_std, lambda_optimizer, batch_size, .... Only the current
units are reported; a row of the table is a unit (a model setting, all its
replicates).
"""

from __future__ import annotations

import collections
import os
from typing import Any
from typing import Sequence

import numpy as np

from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import image_report

__all__ = ["ORIGINAL_FINAL_VAL", "figures", "markdown", "summarize", "write_report"]

# Final validation losses of the original code's logged runs at T = 100.
ORIGINAL_FINAL_VAL = {
    ("adding", "gurnn_beta"): 0.0100, ("adding", "lstm"): 2.4e-4,
    ("adding", "irnn"): 0.0146, ("adding", "urnn"): 0.031,
    ("memory", "gurnn_beta"): 0.0058, ("memory", "urnn"): 1.3e-8,
    ("memory", "lstm"): 0.173, ("memory", "irnn"): 0.173,
}
# Fewer updates than this: the report says the run is too short to learn.
_SHORT_RUN_UPDATES = 1_000
_LABELS = {"gurnn": "guRNN₁", "gurnn_beta": "guRNN_β", "urnn": "ruRNN", "lstm": "LSTM",
           "irnn": "IRNN", "tanh": "tanh RNN", "free": "free 2n×2n RNN"}


def _setting_notes(record) -> tuple[str, ...]:
  """What a guRNN record changed from the paper's cell: modReLU, the λ init."""
  notes = []
  if record.get("activation") == "modrelu":
    notes.append("modReLU")
  if record.get("lambda_init") == "phases":
    notes.append("phases init")
  elif record.get("lambda_init_std") == 0:
    notes.append("U = I init")
  return tuple(notes)


def _label(model, lambda_optimizer, notes=()):
  name = _LABELS.get(model, model)
  if not model.startswith("gurnn"):
    return name
  # The configs' default is the original code's plain SGD on λ; mark the alternative.
  notes = list(notes) + (["λ: RMSProp"] if lambda_optimizer == "rmsprop" else [])
  return name + (f" ({', '.join(notes)})" if notes else "")


def _float(v):
  return float(v)  # records store NaN / inf as the strings 'nan' / 'inf', which float reads


def summarize(results: Any) -> dict:
  """Groups the records by (task, T) and unit, replicates within a unit.

  Args:
    results: the records (a list of dicts or a DataFrame, as `load_results` returns
      them); kinds other than "val" and "final" are ignored. Of a record written twice
      (same unit, kind, replicate and step) the last counts.

  Returns:
    ``{(task, T): {unit_id: unit}}`` where ``unit`` is a dict with ``'curves'``
    ``{replicate: {step: val_loss}}``, ``'final'`` ``{replicate: final record}``,
    ``'batch_sizes'`` (a set), ``'model'``, ``'lambda_optimizer'``, ``'name'`` (the
    unit_name) and ``'label'`` (e.g. "guRNN₁ (modReLU, phases init, λ: RMSProp)"; a
    label two units of one (task, T) share gets the unit name appended). Records
    without a ``unit`` are grouped by (model, lambda_optimizer, label).
  """
  out = collections.defaultdict(dict)
  for r in workdir_lib.as_records(results):
    if r.get("kind") not in ("val", "final") or r.get("task") in data.IMAGE_TASKS:
      continue
    label = _label(r["model"], r.get("lambda_optimizer"), _setting_notes(r))
    uid = r.get("unit") or f"{r['model']}|{r.get('lambda_optimizer')}|{label}"
    unit = out[(r["task"], r["T"])].setdefault(uid, {
        "curves": collections.defaultdict(dict), "final": {}, "batch_sizes": set(),
        "model": r["model"], "lambda_optimizer": r.get("lambda_optimizer"),
        "name": r.get("unit_name", uid), "label": label})
    if "batch_size" in r:
      unit["batch_sizes"].add(r["batch_size"])
    if r["kind"] == "val":
      unit["curves"][r["replicate"]][r["step"]] = _float(r["val_loss"])
    else:
      unit["final"][r["replicate"]] = r
  for units in out.values():
    count = collections.Counter(u["label"] for u in units.values())
    for u in units.values():
      if count[u["label"]] > 1:
        u["label"] += f" [{u['name']}]"
  return {k: dict(v) for k, v in out.items()}


def _ordered(units: dict):
  return sorted(units.values(), key=lambda u: (u["model"], str(u["lambda_optimizer"]),
                                                u["label"]))


def _fmt(x):
  return "—" if x is None else (f"{x:.4g}" if np.isfinite(x) else str(x))


def _table(task, T, units) -> list[str]:
  lines = [f"### {task}, T = {T} (random baseline {data.get_task(task).baseline(T):.4g})", "",
           "| model | replicates | final val (median) | final val (best) | test (median) | "
           "original run (val) | steps | wall time (s) |",
           "|---|---|---|---|---|---|---|---|"]
  for unit in _ordered(units):
    finals = list(unit["final"].values())
    if finals:
      val = [_float(r["val_loss"]) for r in finals]
      test = [_float(r["test_loss"]) for r in finals]
      steps = max(r["step"] for r in finals)
      secs = max((r["seconds"] for r in finals if "seconds" in r), default=None)
      cells = [np.median(val), np.min(val), np.median(test)]
    else:  # unfinished: the last subsample validation
      last = [c[max(c)] for c in unit["curves"].values() if c]
      steps = max((max(c) for c in unit["curves"].values() if c), default=0)
      cells = [np.median(last) if last else None, np.min(last) if last else None, None]
      secs = None
    original = ORIGINAL_FINAL_VAL.get((task, unit["model"])) if T == 100 else None
    status = "" if finals else " (unfinished, subsample)"
    replicates = len(set(unit["curves"]) | set(unit["final"]))
    lines.append(f"| {unit['label']}{status} | {replicates} | "
                 + " | ".join(_fmt(c) for c in cells)
                 + f" | {_fmt(original)} | {steps} | "
                 + ("—" if secs is None else f"{float(secs):.0f}") + " |")
  return lines + [""]


def _figure(task, T, units):
  from matplotlib.figure import Figure
  fig = Figure(figsize=(6.5, 4.2))
  ax = fig.subplots()
  for i, unit in enumerate(_ordered(units)):
    color = f"C{i}"
    curves = [sorted(c.items()) for c in unit["curves"].values() if c]
    for c in curves:
      ax.plot([u for u, _ in c], [v for _, v in c], color=color, alpha=0.25, lw=0.7)
    common = sorted(set.intersection(*(set(u for u, _ in c) for c in curves))) if curves else []
    if common:
      med = [np.median([dict(c)[u] for c in curves]) for u in common]
      ax.plot(common, med, color=color, lw=1.5, label=unit["label"])
  baseline = data.get_task(task).baseline(T)
  ax.axhline(baseline, color="k", ls=":", lw=1, label="random baseline")
  ax.set_yscale("log")
  # Keep divergent runs (the IRNN on memory reaches 1e15) from flattening the others.
  ax.set_ylim(top=min(ax.get_ylim()[1], 20 * baseline))
  batch_sizes = set().union(*(unit["batch_sizes"] for unit in units.values()))
  ax.set_xlabel(f"steps (batches of {batch_sizes.pop()})" if len(batch_sizes) == 1
                else "steps")
  ax.set_ylabel("validation " + ("MSE" if task == "adding" else "cross-entropy"))
  ax.set_title(f"{task} problem, T = {T}")
  ax.legend(fontsize=8)
  fig.tight_layout()
  return fig


def figures(results: Any) -> dict:
  """One Figure-3-style plot per (task, T), as `matplotlib.figure.Figure` objects.

  Args:
    results: the records (a list of dicts or a DataFrame, as `load_results` returns
      them).

  Returns:
    ``{"figure3_{task}_T{T}": Figure}``: validation loss (log scale) against training
    steps, per unit the median over its replicates (at the steps all of them reached)
    and every replicate faintly, the task's random baseline dotted. Show one in a
    notebook by evaluating it; save with ``fig.savefig(path)``.

  Raises:
    ValueError: a record names a task `lie_unitary.experiments.rnn.data` lacks.
  """
  out = {f"figure3_{task}_T{T}": _figure(task, T, units)
         for (task, T), units in sorted(summarize(results).items())}
  return {**out, **image_report.figures(workdir_lib.as_records(results))}


def markdown(results: Any, *, figure_files: dict | None = None,
             superseded: Sequence[tuple[str, str]] = ()) -> str:
  """The Markdown table of final losses, one section per (task, T), a row per unit.

  Args:
    results: the records (a list of dicts or a DataFrame, as `load_results` returns
      them).
    figure_files: ``{figure key: file name}`` of figures saved beside the report (as
      `write_report` does); each gets an image link under its table. None: no links.
    superseded: ``(unit_name, unit_id)`` pairs left out because a later launch
      replaced them (`workdir.superseded_units`); listed in a note.

  Returns:
    The report's text. A row: the model's label (with its setting's notes, e.g.
    "guRNN₁ (modReLU, phases init, λ: RMSProp)"), the number of replicates, the
    median and best final validation loss on the full set, the median test loss, the
    original code's logged final validation loss (T = 100), the steps trained and the
    wall time. A unit without "final" records shows its last subsample validation,
    marked unfinished.

  Raises:
    ValueError: a record names a task `lie_unitary.experiments.rnn.data` lacks.
  """
  figure_files = figure_files or {}
  records = workdir_lib.as_records(results)
  sizes = sorted({int(r["eval_size"]) for r in records if "eval_size" in r})
  sets = (f"{' / '.join(f'{n:,}' for n in sizes)} sequences each" if sizes
          else "their sizes not recorded")
  lines = ["# RNN results", ""]
  if any(r.get("task") not in data.IMAGE_TASKS for r in records):
    lines += [f"Final losses on the full validation and test sets ({sets}; median and best "
              "over replicates); 'original run' is the final validation loss the original "
              "code's logged runs reached (T = 100 only).", ""]
  lines += _short_run_note(records)
  if superseded:
    lines += ["superseded: " + ", ".join(f"{name} ({uid})" for name, uid in superseded)
              + " (replaced by a later launch; left out).", ""]
  for (task, T), units in sorted(summarize(results).items()):
    lines += _table(task, T, units)
    key = f"figure3_{task}_T{T}"
    if key in figure_files:
      lines += [f"![{task}, T = {T}]({figure_files[key]})", ""]
  lines += image_report.markdown(records)
  lines += [f"![{key}]({name})" for key, name in figure_files.items()
            if key.startswith("images_")]
  return "\n".join(lines)


def _short_run_note(records: Sequence[dict]) -> list[str]:
  """A warning when every unit trained far less than the paper's 50,000 updates."""
  steps = [int(r["step"]) for r in records if r.get("kind") == "final"
           and r.get("task") not in data.IMAGE_TASKS]
  if steps and max(steps) < _SHORT_RUN_UPDATES:
    return [f"**A short run ({max(steps):,} updates at most, against the paper's 50,000): "
            "too short to learn these tasks; it checks that everything runs, and its "
            "losses are not results.**", ""]
  return []


def write_report(workdir: str, results: Any = None) -> list[str]:
  """Writes WORKDIR/report.md and one figure3_{task}_T{T}.png per (task, T).

  Args:
    workdir: the experiment's working directory; the files are written there.
    results: the records; default: the current ones of WORKDIR/results.jsonl
      (``workdir.load_results(workdir, as_frame=False)``), with a note listing the
      superseded units (given records get no such note).

  Returns:
    The paths written: report.md first, then the PNGs.

  Raises:
    FileNotFoundError, ValueError: `results` is None and the workdir holds no
      results.jsonl, or no current records in it (see `workdir.load_results`).
  """
  superseded = []
  if results is None:
    results = workdir_lib.load_results(workdir, as_frame=False)
    superseded = workdir_lib.superseded_units(workdir)
  results = workdir_lib.as_records(results)
  paths, files = [], {}
  for key, fig in figures(results).items():
    path = os.path.join(workdir, f"{key}.png")
    fig.savefig(path, dpi=120)
    files[key] = f"{key}.png"
    paths.append(path)
  report = workdir_lib.path(workdir, workdir_lib.REPORT)
  with open(report, "w", encoding="utf-8") as f:
    f.write(markdown(results, figure_files=files, superseded=superseded))
  return [report] + paths
