"""The sequential-image tasks' table and figures (pixel and permuted MNIST-family).

`markdown(records)` gives one table per (task, dataset): a row per unit with its
model, trainable parameters, epochs, and over replicates (mean ± s.e.) the best
validation accuracy, the test accuracy at that point (model selection on the
validation split) and the best test accuracy over the run (the published anchors'
protocol), and the wall time; then the published MNIST anchors. `figures(records)`
gives validation accuracy against epochs and against wall-clock time.
"""

from __future__ import annotations

import collections
from typing import Sequence

import numpy as np

__all__ = ["ANCHORS", "figures", "markdown"]

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
_LABELS = {"gurnn": "guRNN (modReLU)", "orthogonal": "orthogonal RNN (expRNN's)",
           "lstm": "LSTM"}


def _units(records: Sequence[dict]) -> dict:
  """{(task, dataset): {unit id: {"final", "val", "model", "name"}}}, the last of a
  record written twice counting."""
  out = collections.defaultdict(dict)
  for r in records:
    if r.get("kind") not in ("val", "final"):
      continue
    u = out[(r["task"], r.get("dataset", "?"))].setdefault(r["unit"], {
        "final": {}, "val": collections.defaultdict(dict), "model": r["model"],
        "name": r.get("unit_name", r["unit"]), "hidden_size": r.get("hidden_size")})
    if r["kind"] == "final":
      u["final"][r["replicate"]] = r
    else:
      u["val"][r["replicate"]][r["step"]] = r
  return out


def _cell(values, scale=100.0) -> str:
  v = np.asarray([x for x in values if x is not None], np.float64) * scale
  if not len(v):
    return "—"
  if len(v) == 1:
    return f"{v[0]:.2f}"
  return f"{v.mean():.2f} ± {v.std(ddof=1) / np.sqrt(len(v)):.2f}"


def markdown(records: Sequence[dict]) -> list[str]:
  """The tables' lines (empty when no record is of an image task)."""
  units = _units([r for r in records if r.get("task") in ("pixel", "permuted")])
  if not units:
    return []
  lines = []
  for (task, dataset), group in sorted(units.items()):
    lines += [f"### {'pixel-by-pixel' if task == 'pixel' else 'permuted pixel-by-pixel'} "
              f"{dataset} (T = 784)", "",
              "Accuracy (%), mean ± s.e. over replicates: the best validation accuracy, the "
              "test accuracy at that point (selected on the validation split), and the "
              "best test accuracy over the run (the published anchors' protocol).", "",
              "| model | hidden | parameters | replicates | epochs | best val | test at best "
              "val | best test | wall time (s) |", "|---|---|---|---|---|---|---|---|---|"]
    for u in sorted(group.values(), key=lambda u: (u["model"], u["name"])):
      finals = list(u["final"].values())
      if finals:
        f0 = finals[0]
        epochs = f"{f0.get('epoch', 0):g}"
        row = [_cell([f["best_val_accuracy"] for f in finals]),
               _cell([f["test_accuracy"] for f in finals]),
               _cell([f["best_test_accuracy"] for f in finals]),
               f"{max(f['seconds'] for f in finals):.0f}"]
        params = f"{int(f0['num_params']):,}"
      else:  # unfinished: its last validation point
        last = [max(v.items())[1] for v in u["val"].values() if v]
        epochs = f"{last[0].get('epoch', 0):g} (unfinished)" if last else "0"
        row = [_cell([r["val_accuracy"] for r in last]),
               _cell([r["test_accuracy"] for r in last]), "—",
               f"{max(r['seconds'] for r in last):.0f}" if last else "—"]
        params = "—"
      lines.append(f"| {_LABELS.get(u['model'], u['model'])} | {u['hidden_size']} | "
                   f"{params} | {len(finals) or len(u['val'])} | {epochs} | "
                   + " | ".join(row) + " |")
    lines.append("")
  column = 0 if all(t == "pixel" for t, _ in units) else 1
  lines += ["Published MNIST anchors (best test epoch; "
            f"{'sMNIST' if column == 0 else 'psMNIST'}):", "",
            "| model | hidden | parameters | test accuracy (%) |", "|---|---|---|---|"]
  lines += [f"| {m} | {h} | {p} | {acc[column]} |" for (m, h, p), acc in ANCHORS.items()]
  return lines + [""]


def figures(records: Sequence[dict]) -> dict:
  """{"images_{task}_{dataset}": Figure}: validation accuracy against epochs (left) and
  against wall-clock seconds (right), the median over replicates per unit."""
  from matplotlib.figure import Figure
  out = {}
  units = _units([r for r in records if r.get("task") in ("pixel", "permuted")])
  for (task, dataset), group in sorted(units.items()):
    fig = Figure(figsize=(10, 4))
    by_epoch, by_time = fig.subplots(1, 2)
    for i, u in enumerate(sorted(group.values(), key=lambda u: (u["model"], u["name"]))):
      steps = sorted(set.intersection(*(set(v) for v in u["val"].values())))
      if not steps:
        continue
      rows = [[u["val"][r][s] for r in u["val"]] for s in steps]
      acc = [100 * np.median([x["val_accuracy"] for x in row]) for row in rows]
      label = f"{_LABELS.get(u['model'], u['model'])} ({u['hidden_size']})"
      by_epoch.plot([row[0].get("epoch", 0) for row in rows], acc, color=f"C{i}", label=label)
      by_time.plot([np.median([x["seconds"] for x in row]) for row in rows], acc,
                   color=f"C{i}", label=label)
    for ax, x in ((by_epoch, "epochs"), (by_time, "wall-clock seconds (all replicates)")):
      ax.set_xlabel(x)
      ax.set_ylabel("validation accuracy (%)")
      ax.grid(alpha=0.3)
    by_epoch.legend(fontsize=8)
    fig.suptitle(f"{task} {dataset}")
    fig.tight_layout()
    out[f"images_{task}_{dataset.replace('/', '_')}"] = fig
  return out
