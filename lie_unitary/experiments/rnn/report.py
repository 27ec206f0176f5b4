"""Figure-3-style plots and a Markdown table from an RNN workdir's results.jsonl.

`write_report(workdir)` writes, for every (task, T) in the records,
`WORKDIR/figure3_{task}_T{T}.png` (validation loss vs updates: the median over seeds
per model, every seed faintly, the random baseline dotted) and `WORKDIR/report.md`
(final full-validation and test losses per model beside the original runs' numbers).
matplotlib is imported only when a figure is drawn.
"""

from __future__ import annotations

import collections
import os

import numpy as np

from lie_unitary.experiments import records
from lie_unitary.experiments.rnn import tasks

__all__ = ["ORIGINAL_FINAL_VAL", "summarize", "write_report"]

# Final validation losses the original runs logged at T = 100 (SPEC §4).
ORIGINAL_FINAL_VAL = {
    ("adding", "gurnn_beta"): 0.0100, ("adding", "lstm"): 2.4e-4,
    ("adding", "irnn"): 0.0146, ("adding", "urnn"): 0.031,
    ("memory", "gurnn_beta"): 0.0058, ("memory", "urnn"): 1.3e-8,
    ("memory", "lstm"): 0.173, ("memory", "irnn"): 0.173,
}
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


def summarize(recs: list[dict]) -> dict:
  """Groups records: {(task, T): {(model, lambda_optimizer): {'curves': {replicate: (u, v)},
  'final': [records], 'batch_sizes': set, 'notes': the setting's label notes}}}."""
  out = collections.defaultdict(lambda: collections.defaultdict(
      lambda: {"curves": collections.defaultdict(dict), "final": {}, "batch_sizes": set(),
               "notes": ()}))
  for r in recs:
    unit = out[(r["task"], r["T"])][(r["model"], r.get("lambda_optimizer"))]
    if "batch_size" in r:
      unit["batch_sizes"].add(r["batch_size"])
    unit["notes"] = _setting_notes(r)
    if r["kind"] == "val":
      unit["curves"][r["replicate"]][r["step"]] = _float(r["val_loss"])
    elif r["kind"] == "final":
      unit["final"][r["replicate"]] = r
  return out


def _fmt(x):
  return "—" if x is None else (f"{x:.4g}" if np.isfinite(x) else str(x))


def _table(task, T, units) -> list[str]:
  lines = [f"### {task}, T = {T} (random baseline {tasks.get_task(task).baseline(T):.4g})", "",
           "| model | seeds | final val (median) | final val (best) | test (median) | "
           "original run (val) | updates | wall time (s) |",
           "|---|---|---|---|---|---|---|---|"]
  for (model, lopt), unit in sorted(units.items()):
    finals = list(unit["final"].values())
    if finals:
      val = [_float(r["val_loss"]) for r in finals]
      test = [_float(r["test_loss"]) for r in finals]
      upd = max(r["step"] for r in finals)
      secs = max(r["seconds"] for r in finals)
      cells = [np.median(val), np.min(val), np.median(test)]
    else:  # unfinished: the last subsample validation
      last = [c[max(c)] for c in unit["curves"].values() if c]
      upd = max((max(c) for c in unit["curves"].values() if c), default=0)
      cells = [np.median(last) if last else None, np.min(last) if last else None, None]
      secs = None
    original = ORIGINAL_FINAL_VAL.get((task, model)) if T == 100 else None
    status = "" if finals else " (unfinished, subsample)"
    lines.append(f"| {_label(model, lopt, unit['notes'])}{status} | {len(unit['curves'])} | "
                 + " | ".join(_fmt(c) for c in cells)
                 + f" | {_fmt(original)} | {upd} | {'—' if secs is None else f'{secs:.0f}'} |")
  return lines + [""]


def _figure(path, task, T, units):
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  fig, ax = plt.subplots(figsize=(6.5, 4.2))
  for i, ((model, lopt), unit) in enumerate(sorted(units.items())):
    color = f"C{i}"
    curves = [sorted(c.items()) for c in unit["curves"].values() if c]
    for c in curves:
      ax.plot([u for u, _ in c], [v for _, v in c], color=color, alpha=0.25, lw=0.7)
    common = sorted(set.intersection(*(set(u for u, _ in c) for c in curves))) if curves else []
    if common:
      med = [np.median([dict(c)[u] for c in curves]) for u in common]
      ax.plot(common, med, color=color, lw=1.5, label=_label(model, lopt, unit["notes"]))
  ax.axhline(tasks.get_task(task).baseline(T), color="k", ls=":", lw=1, label="random baseline")
  ax.set_yscale("log")
  # Keep divergent runs (the IRNN on memory reaches 1e15) from flattening the others.
  ax.set_ylim(top=min(ax.get_ylim()[1], 20 * tasks.get_task(task).baseline(T)))
  batch_sizes = set().union(*(unit.get("batch_sizes", set()) for unit in units.values()))
  ax.set_xlabel(f"updates (batches of {batch_sizes.pop()})" if len(batch_sizes) == 1
                else "updates")
  ax.set_ylabel("validation " + ("MSE" if task == "adding" else "cross-entropy"))
  ax.set_title(f"{task} problem, T = {T}")
  ax.legend(fontsize=8)
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)


def write_report(workdir: str, figures: bool = True) -> list[str]:
  """Writes report.md (and the PNGs) for WORKDIR/results.jsonl; returns the paths."""
  groups = summarize(records.read_records(os.path.join(workdir, "results.jsonl")))
  lines = ["# RNN results", "",
           "Final losses on the full 10,000-sequence validation and test sets (median and "
           "best over seeds); 'original run' is the final validation loss the paper's runs "
           "logged (T = 100 only).", ""]
  paths = []
  for (task, T), units in sorted(groups.items()):
    lines += _table(task, T, units)
    if figures:
      path = os.path.join(workdir, f"figure3_{task}_T{T}.png")
      _figure(path, task, T, units)
      paths.append(path)
  report = os.path.join(workdir, "report.md")
  with open(report, "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
  return [report] + paths
