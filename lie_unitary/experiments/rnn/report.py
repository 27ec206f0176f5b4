"""The RNN family's report: Figure 3 and a loss table for the adding and memory problems
(paper §4); accuracy tables and curves for the sequential-image tasks.

A row is a setting: the units of one model and settings (a record's fields but its
seed), every seed's, their replicates pooled into runs (one run: a seed's replicate).
Where one table has several rows of a model, the row names the fields that tell them
apart. `figures` and `markdown` take the
records (`workdir.load_results`), for notebooks as for files; figures are built without
pyplot, leaving the caller's matplotlib state alone. Where WORKDIR/torch_reference.jsonl
holds the PyTorch reference's records (`python -m benchmarks torch_reference --out=...`),
an image task shows the reference beside our models.
"""

from __future__ import annotations

import collections
import os
from typing import Any
from typing import Sequence

import numpy as np

from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import data

__all__ = ["ANCHORS", "ORIGINAL_FINAL_VAL", "REFERENCE", "figures", "image_summary", "markdown",
           "published_table", "write_report"]

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
# Published test accuracies (%) on MNIST: 70 epochs of RMSProp at batch 128, the best
# test accuracy over epochs, training on all 60,000 images (no validation split).
# (model, hidden units, parameters) -> (sMNIST, psMNIST, source).
# Read from copies of the paper's MNIST table, not from the paper: its table number and
# numbers are still to be checked against it (docs/sequential_images.md, "The published table").
_EXPRNN = "Lezcano-Casado & Martínez-Rubio 2019 (expRNN), MNIST table*"
ANCHORS = {
    ("expRNN", 170, "16K"): (98.0, 94.9, _EXPRNN),
    ("expRNN", 360, "69K"): (98.4, 96.2, _EXPRNN),
    ("expRNN", 512, "137K"): (98.7, 96.6, _EXPRNN),
    ("scoRNN (Helfrich et al. 2018)", 170, "16K"): (97.2, 94.8, _EXPRNN),
    ("scoRNN (Helfrich et al. 2018)", 360, "69K"): (98.1, 95.9, _EXPRNN),
    ("scoRNN (Helfrich et al. 2018)", 512, "137K"): (98.2, 96.5, _EXPRNN),
    ("LSTM", 128, "69K"): (81.9, 79.5, _EXPRNN),
}
# Fewer updates than this: the report says the run is too short to learn.
_SHORT_RUN_UPDATES = 1_000
_LABELS = {"gurnn": "guRNN₁", "gurnn_beta": "guRNN_β", "urnn": "ruRNN", "lstm": "LSTM",
           "irnn": "IRNN", "tanh": "tanh RNN", "free": "free 2n×2n RNN"}
_IMAGE_LABELS = {"gurnn": "guRNN (modReLU)", "orthogonal": "orthogonal RNN (expRNN's)",
                 "lstm": "LSTM"}
# Record keys that are not unit fields (a record: the unit's fields, then these).
_NOT_FIELDS = {"kind", "replicate", "step", "seconds", "epoch", "unit", "unit_name", "seed",
               "num_params", workdir_lib.DRIFT_FIELD, *workdir_lib.SPECTRUM_FIELDS}
_METRIC = ("val_", "test_", "train_", "best_")
_SE = "mean ± standard error over the n runs (a run: one seed's replicate)"


def _label(fields: dict, images: bool) -> str:
  """A model's label; a synthetic guRNN's with what its setting changes from the paper's
  (e.g. "guRNN₁ (modReLU, phases init, λ: RMSProp)")."""
  model = fields["model"]
  if images:
    return _IMAGE_LABELS.get(model, model)
  name = _LABELS.get(model, model)
  if not model.startswith("gurnn"):
    return name
  notes = ["modReLU"] if fields.get("activation") == "modrelu" else []
  if fields.get("lambda_init") == "phases":
    notes.append("phases init")
  elif fields.get("lambda_init_std") == 0:
    notes.append("U = I init")
  if fields.get("lambda_optimizer") == "rmsprop":  # the configs' default is plain SGD on λ
    notes.append("λ: RMSProp")
  return name + (f" ({', '.join(notes)})" if notes else "")


def _value(v) -> str:
  if isinstance(v, float):
    return f"{v:.4g}"
  return "(" + ", ".join(map(_value, v)) + ")" if isinstance(v, (list, tuple)) else str(v)


def _rows(records: Sequence[dict], images: bool) -> dict:
  """The "val" and "final" records of the synthetic (or `images`: the image) tasks as
  {(task, T) (images: (task, dataset)): [row]}, a row a setting: a dict of "model",
  "fields", "label", "setting" (what tells it from the same model's other rows, or ""),
  "seeds" and "runs" {(seed, replicate): {"val": {step: record}, "final": record}}; of a
  record written twice the last counts."""
  out = collections.defaultdict(dict)
  for r in records:
    if r.get("kind") not in ("val", "final") or (r.get("task") in data.IMAGE_TASKS) != images:
      continue
    key = (r["task"], r.get("dataset", "?") if images else r["T"])
    fields = {k: v for k, v in r.items() if k not in _NOT_FIELDS and not k.startswith(_METRIC)}
    row = out[key].setdefault(repr(sorted(fields.items())), {
        "model": r["model"], "fields": fields, "seeds": set(),
        "runs": collections.defaultdict(lambda: {"val": {}, "final": None})})
    row["seeds"].add(r.get("seed", 0))
    run = row["runs"][(r.get("seed", 0), r["replicate"])]
    if r["kind"] == "val":
      run["val"][r["step"]] = r
    else:
      run["final"] = r
  tables = {}
  for key, rows in sorted(out.items()):
    rows = list(rows.values())
    for row in rows:
      same = [o["fields"] for o in rows if o["model"] == row["model"]]
      differ = sorted(k for k in set().union(*same) if any(
          f.get(k) != same[0].get(k) for f in same))
      row["label"] = _label(row["fields"], images)
      row["setting"] = ", ".join(f"{k}={_value(row['fields'].get(k, '—'))}" for k in differ)
    order = (lambda r: (list(_IMAGE_LABELS).index(r["model"]) if r["model"] in _IMAGE_LABELS
                        else 9, r["setting"])) if images else (
        lambda r: (r["model"], str(r["fields"].get("lambda_optimizer")), r["setting"]))
    tables[key] = sorted(rows, key=order)
  return tables


def _fmt(x) -> str:
  return "—" if x is None else (f"{x:.4g}" if np.isfinite(x) else str(x))


def mean_se(values, scale: float = 100.0, digits: int = 2) -> str:
  """"m ± s": the mean and standard error (ddof 1) of `values` × `scale`.

  Args:
    values: floats (None entries are skipped), e.g. accuracies in [0, 1] with scale 100.
    scale: factor applied before formatting.
    digits: decimals of both numbers.

  Returns:
    "m ± s" for two or more values, the value alone for one, "—" for none.
  """
  v = np.asarray([x for x in values if x is not None], np.float64) * scale
  if len(v) < 2:
    return f"{v[0]:.{digits}f}" if len(v) else "—"
  return f"{v.mean():.{digits}f} ± {v.std(ddof=1) / np.sqrt(len(v)):.{digits}f}"


def epoch_range(epochs) -> str:
  """"E" when every epoch of `epochs` (floats, at least one) is E, else "E1–E2"."""
  lo, hi = min(epochs), max(epochs)
  return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"


def _seeds(seeds) -> str:
  return ", ".join(map(str, sorted(seeds)))


def _loss_table(task: str, T: int, rows: list) -> list[str]:
  lines = [f"### {task}, T = {T} (random baseline {data.get_task(task).baseline(T):.4g})", "",
           "| model | setting | seeds | runs | final val (median) | final val (best) | "
           "test (median) | original run (val) | steps | wall time (s) |",
           "|---|---|---|---|---|---|---|---|---|---|"]
  for row in rows:
    finals = [run["final"] for run in row["runs"].values() if run["final"]]
    # Records store NaN / inf as the strings 'nan' / 'inf', which float reads.
    if finals:
      val, test = ([float(r[k]) for r in finals] for k in ("val_loss", "test_loss"))
      cells = [np.median(val), np.min(val), np.median(test)]
      steps = max(r["step"] for r in finals)
      secs = max((r["seconds"] for r in finals if "seconds" in r), default=None)
    else:  # unfinished: the last subsample validation
      last = [float(run["val"][max(run["val"])]["val_loss"]) for run in row["runs"].values()
              if run["val"]]
      cells = [np.median(last), np.min(last), None] if last else [None] * 3
      steps = max((max(run["val"]) for run in row["runs"].values() if run["val"]), default=0)
      secs = None
    cells.append(ORIGINAL_FINAL_VAL.get((task, row["model"])) if T == 100 else None)
    lines.append(f"| {row['label']}{'' if finals else ' (unfinished, subsample)'} | "
                 f"{row['setting'] or '—'} | {_seeds(row['seeds'])} | {len(row['runs'])} | "
                 f"{' | '.join(map(_fmt, cells))} | {steps} | "
                 f"{'—' if secs is None else f'{float(secs):.0f}'} |")
  return lines + [""]


def _best(points: Sequence[dict]) -> tuple[dict, float]:
  """Of a run's validation points after step 0: the first with the best validation
  accuracy, and the best test accuracy."""
  return (max(points, key=lambda r: r["val_accuracy"]),
          max(r["test_accuracy"] for r in points))


def _image_cells(runs: Sequence[Sequence[dict]]) -> list[str]:
  """Over runs (each its validation points): the best validation accuracy, the test
  accuracy there and the best test accuracy over epochs, as cells."""
  best = [_best(points) for points in runs if points]
  return [mean_se([b["val_accuracy"] for b, _ in best]),
          mean_se([b["test_accuracy"] for b, _ in best]), mean_se([t for _, t in best])]


def image_summary(results: Any) -> dict:
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
  out = {}
  for key, rows in _rows(workdir_lib.as_records(results), images=True).items():
    models = [row["model"] for row in rows]
    if len(set(models)) < len(models):
      raise ValueError(f"image_summary: the {key[0]} {key[1]} table has several settings "
                       f"of one model ({sorted(models)}); summarise one setting per model")
    out[key] = {}
    for row in rows:
      points = [[r for s, r in sorted(run["val"].items()) if s > 0]
                for run in row["runs"].values()]
      best = [_best(p) for p in points if p]
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


def _reference_runs(reference: Sequence[dict], task: str, dataset: str) -> dict:
  """{seed: {epoch: record}} of the PyTorch reference's records of `task` on `dataset`
  (a reference run's dataset may be the path of its folder: its last part counts)."""
  name = lambda d: os.path.basename(str(d).rstrip("/"))
  runs = collections.defaultdict(dict)
  for r in reference:
    if r.get("task") == task and name(r.get("dataset", "")) == name(dataset):
      runs[r["seed"]][r["epoch"]] = r
  return runs


def _accuracy_table(task: str, dataset: str, rows: list, runs: dict) -> list[str]:
  lines = [f"### {'pixel-by-pixel' if task == 'pixel' else 'permuted pixel-by-pixel'} "
           f"{dataset} (T = 784)", "",
           f"Accuracy (%), {_SE}: the best validation accuracy, the test accuracy at that "
           "epoch (chosen on the validation split), and the best test accuracy over the "
           "epochs (the published anchors' protocol, which has no validation split). Where some "
           "of a row's runs have finished, the row is theirs and says how many more are "
           "running.", "",
           "| model | setting | hidden | parameters | seeds | n | epochs | best val | test at "
           "best val | best test over epochs | wall time per unit (s) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
  for row in rows:
    # The finished runs, once there are any (a running one joins when it finishes); else
    # every run so far, its row marked unfinished.
    ours = {key: (run, [r for s, r in sorted(run["val"].items()) if s > 0])
            for key, run in row["runs"].items()}
    finished = {key: v for key, v in ours.items() if v[0]["final"]}
    shown = finished or ours
    points = [p for _, p in shown.values()]
    last = lambda p: max(p, key=lambda r: r["step"]).get("epoch", 0) if p else 0  # noqa: E731
    epochs = sorted({last(p) for p in points if p})
    epochs = epoch_range(epochs) if epochs else "0"
    running = [last(p) for key, (_, p) in ours.items() if key not in finished]
    if not finished:
      epochs += " (unfinished)"
    elif running:
      epochs += f"; {len(running)} more running, epoch {epoch_range(running)}"
    finals = [run["final"] for run, _ in finished.values()]
    params = f"{int(finals[0]['num_params']):,}" if finals and "num_params" in finals[0] else "—"
    secs = [max(r["seconds"] for r in p) for p in points if p]
    wall = f"{np.median(secs):.0f}" if secs else "—"
    seeds = {seed for seed, _ in shown}
    lines.append(f"| {row['label']} | {row['setting'] or '—'} | {row['fields']['hidden_size']} "
                 f"| {params} | {_seeds(seeds)} | {len(shown)} | {epochs} | "
                 + " | ".join(_image_cells(points)) + f" | {wall} |")
  if runs:
    hidden = {r.get("hidden") for run in runs.values() for r in run.values()}
    wall = np.median([max(r["seconds"] for r in run.values()) for run in runs.values()])
    lines.append(f"| {_REFERENCE_LABEL} | — | {'/'.join(map(str, sorted(hidden)))} | — | "
                 f"{_seeds(runs)} | {len(runs)} | {max(max(run) for run in runs.values())} | "
                 + " | ".join(_image_cells([list(run.values()) for run in runs.values()]))
                 + f" | {wall:.0f} |")
  if any("=—" in row["setting"] for row in rows):
    lines += ["", "A setting's field given as — is absent from that unit's records: the unit "
              "was recorded before the field existed or entered a unit's identity."]
  return lines + [""]


def _row_label(row: dict) -> str:
  """A row's model label, with its setting in brackets when it has one."""
  return row["label"] + (f" [{row['setting']}]" if row["setting"] else "")


def _epoch_table(rows: list, runs: dict) -> list[str]:
  """Test accuracy at every validation point: a line per epoch, a column per row (and the
  reference, at the end of each of its epochs)."""
  def column(points):  # (epoch, record) -> {epoch: [test accuracies]}
    out = collections.defaultdict(list)
    for epoch, r in points:
      out[round(float(epoch), 3)].append(r.get("test_accuracy"))
    return out

  columns = [column((r.get("epoch", 0), r) for run in row["runs"].values()
                    for r in run["val"].values()) for row in rows]
  labels = [_row_label(row) for row in rows]
  if runs:
    columns.append(column(p for run in runs.values() for p in run.items()))
    labels.append(_REFERENCE_LABEL)
  lines = [f"Test accuracy (%) at each validation point, {_SE}:", "",
           "| epoch | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
  lines += [f"| {e:g} | " + " | ".join(mean_se(c.get(e, [])) for c in columns) + " |"
            for e in sorted(set().union(*columns))]
  return lines + [""]


_BLOCK_EPOCHS = 10

# The per-epoch fields the block tables average: {field: (what it is, mean_se's scale,
# digits)}.
_BLOCK_FIELDS = {
    "test_accuracy": ("Test accuracy (%)", 100.0, 2),
    "train_loss": ("Training loss (each epoch's mean over its batches)", 1.0, 3),
    "val_loss": ("Validation loss (the validation split)", 1.0, 3),
}


def _block_table(rows: list, runs: dict, field: str = "test_accuracy",
                 width: int = _BLOCK_EPOCHS) -> list[str]:
  """`field` averaged over blocks of `width` epochs (1-10, 11-20, ...): each run's mean
  over its evaluations in the block, then mean ± standard error over the runs that
  finished the block ("(k of n)" when not all did). One evaluation picked out of many (the
  best validation epoch, the best test) carries that evaluation's noise; a block's mean
  does not. A column per row that records `field` (and the reference, if its records do).
  [] unless some run finished two blocks (the 10-epoch tables have none)."""
  def column(curves):  # curves: per run, [(epoch, value)] -> {block: [run means]}
    out = collections.defaultdict(list)
    for curve in curves:
      last = max((e for e, _ in curve), default=0.0)
      for b in range(int(last // width)):
        values = [v for e, v in curve if b * width < e <= (b + 1) * width and v is not None]
        if values:
          out[b].append(float(np.mean(values)))
    return out

  curves = [[[(float(r.get("epoch", 0)), r.get(field)) for r in run["val"].values()]
             for run in row["runs"].values()] for row in rows]
  labels = [_row_label(row) for row in rows]
  if runs:
    curves.append([[(float(e), r.get(field)) for e, r in run.items()] for run in runs.values()])
    labels.append(_REFERENCE_LABEL)
  kept = [i for i, c in enumerate(curves) if any(v is not None for run in c for _, v in run)]
  curves, labels = [curves[i] for i in kept], [labels[i] for i in kept]
  columns = [column(c) for c in curves]
  if max((len(c) for c in columns), default=0) < 2:
    return []
  what, scale, digits = _BLOCK_FIELDS[field]

  def cell(values, n):
    return "—" if not values else mean_se(values, scale, digits) + (
        f" ({len(values)} of {n})" if len(values) < n else "")

  lines = [f"{what} averaged over blocks of {width} epochs (each run's mean over "
           f"the block's evaluations), {_SE}; a run counts once it has finished the block:", "",
           "| epochs | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
  lines += [f"| {b * width + 1}-{(b + 1) * width} | "
            + " | ".join(cell(c.get(b, []), len(cs)) for c, cs in zip(columns, curves)) + " |"
            for b in sorted(set().union(*columns))]
  return lines + [""]


def _run_table(rows: list, width: int = _BLOCK_EPOCHS) -> list[str]:
  """A line per run (a seed's replicate) of the accuracy table's rows: its epochs, its best
  validation accuracy and the epoch of it (the first, on ties), the test accuracy there, its
  best test accuracy and that epoch, ‖U − U₀‖_F / √n at its last point, and its wall time;
  a run without its final record is marked running. [] unless some run reached two blocks
  of `width` epochs (the 10-epoch tables' means say enough)."""
  furthest = max((float(r.get("epoch", 0)) for row in rows for run in row["runs"].values()
                  for r in run["val"].values()), default=0.0)
  if furthest < 2 * width:
    return []
  key = workdir_lib.DRIFT_FIELD
  epoch = lambda r: f"{float(r.get('epoch', 0)):g}"  # noqa: E731
  lines = []
  for row in rows:
    label = _row_label(row)
    for (seed, replicate), run in sorted(row["runs"].items()):
      points = [r for s, r in sorted(run["val"].items()) if s > 0]
      if not points:
        continue
      at_best_val, _ = _best(points)
      at_best_test = max(points, key=lambda r: r["test_accuracy"])
      last = points[-1]
      lines.append(
          f"| {label} | {seed} | {replicate} | {epoch(last)}"
          f"{'' if run['final'] else ' (running)'} | {100 * at_best_val['val_accuracy']:.2f} "
          f"| {epoch(at_best_val)} | {100 * at_best_val['test_accuracy']:.2f} "
          f"| {100 * at_best_test['test_accuracy']:.2f} | {epoch(at_best_test)} "
          f"| {f'{last[key]:.4f}' if key in last else '—'} | {last['seconds']:.0f} |")
  return ["Each run (a seed's replicate) on its own: accuracy (%), the epoch of the best "
          "validation accuracy (the first, on ties) and of the best test accuracy, "
          "‖U − U₀‖_F / √n at its last point, wall time (s):", "",
          "| model | seed | replicate | epochs | best val | at epoch | test at best val "
          "| best test | at epoch | ‖U − U₀‖_F / √n | wall time (s) |",
          "|---|---|---|---|---|---|---|---|---|---|---|"] + lines + [""]


def _drift_table(rows: list) -> list[str]:
  """‖U − U₀‖_F / √n at every validation point of the rows that record it; [] if none."""
  key = workdir_lib.DRIFT_FIELD
  rows = [row for row in rows if any(key in r for run in row["runs"].values()
                                     for r in run["val"].values())]
  if not rows:
    return []
  columns = []
  for row in rows:
    out = collections.defaultdict(list)
    for run in row["runs"].values():
      for r in run["val"].values():
        if key in r:
          out[round(float(r.get("epoch", 0)), 3)].append(float(r[key]))
    columns.append(out)
  labels = [_row_label(row) for row in rows]
  cell = lambda v: (f"{np.mean(v):.4f}" + (f" ± {np.std(v, ddof=1) / np.sqrt(len(v)):.4f}"
                                           if len(v) > 1 else "")) if v else "—"
  lines = ["How far the recurrent matrix is from its initial value, ‖U − U₀‖_F / √n (0 at the "
           f"start, at most 2), at each validation point, {_SE}:", "",
           "| epoch | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
  lines += [f"| {e:g} | " + " | ".join(cell(c.get(e, [])) for c in columns) + " |"
            for e in sorted(set().union(*columns))]
  return lines + [""]


def published_table() -> list[str]:
  """The published MNIST table, beside any image table."""
  lines = ["Published MNIST results: 70 epochs, batch 128, RMSProp, trained on all 60,000 "
           "training images (no validation split), the best test accuracy over the epochs:",
           "", "| model | hidden | parameters | epochs | sMNIST | psMNIST | source |",
           "|---|---|---|---|---|---|---|"]
  lines += [f"| {m} | {h} | {p} | 70 | {s} | {ps} | {src} |"
            for (m, h, p), (s, ps, src) in ANCHORS.items()]
  return lines + ["", "\\* Read from copies of the paper's table, not from the paper itself: the "
                  "table's number and these numbers are still to be checked against it "
                  "(docs/sequential_images.md, \"The published table\", says which copies).", ""]


def _loss_figure(task: str, T: int, rows: list):
  from matplotlib.figure import Figure
  fig = Figure(figsize=(6.5, 4.2))
  ax = fig.subplots()
  for i, row in enumerate(rows):
    curves = [sorted((s, float(r["val_loss"])) for s, r in run["val"].items())
              for run in row["runs"].values() if run["val"]]
    for c in curves:
      ax.plot([s for s, _ in c], [v for _, v in c], color=f"C{i}", alpha=0.25, lw=0.7)
    common = sorted(set.intersection(*(set(s for s, _ in c) for c in curves))) if curves else []
    if common:
      med = [np.median([dict(c)[s] for c in curves]) for s in common]
      label = _row_label(row)
      ax.plot(common, med, color=f"C{i}", lw=1.5, label=label)
  baseline = data.get_task(task).baseline(T)
  ax.axhline(baseline, color="k", ls=":", lw=1, label="random baseline")
  ax.set_yscale("log")
  # Keep divergent runs (the IRNN on memory reaches 1e15) from flattening the others.
  ax.set_ylim(top=min(ax.get_ylim()[1], 20 * baseline))
  batch_sizes = {row["fields"].get("batch_size") for row in rows} - {None}
  ax.set_xlabel(f"steps (batches of {batch_sizes.pop()})" if len(batch_sizes) == 1
                else "steps")
  ax.set_ylabel("validation " + ("MSE" if task == "adding" else "cross-entropy"))
  ax.set_title(f"{task} problem, T = {T}")
  ax.legend(fontsize=8)
  fig.tight_layout()
  return fig


def _accuracy_figure(task: str, dataset: str, rows: list, runs: dict):
  """Per row, the mean over its finished runs, or over all while none has finished (a
  band of ± one standard error), against epochs of the
  validation accuracy and loss and, for models with a recurrent matrix of their own,
  ‖U − U₀‖_F / √n; the mean validation accuracy against wall-clock seconds."""
  from matplotlib.figure import Figure
  fig = Figure(figsize=(10, 7.5))
  (by_epoch, by_time), (loss, drift) = fig.subplots(2, 2)
  drifting = False
  for i, row in enumerate(rows):
    # The finished runs once there are any (as the tables), so a run just started does not
    # cut the others' curves short; else every run, as far as all have come.
    every = list(row["runs"].values())
    drawn = [run for run in every if run["final"]] or every
    more = len(every) - len(drawn)
    steps = sorted(set.intersection(*(set(run["val"]) for run in drawn)))
    if not steps:
      continue
    points = [[run["val"][s] for run in drawn] for s in steps]
    epochs = [p[0].get("epoch", 0) for p in points]

    def band(ax, key, scale=1.0, **kw):  # nothing when a point lacks the field
      if not all(key in x for p in points for x in p):
        return None
      values = np.asarray([[scale * float(x[key]) for x in p] for p in points])
      mean = values.mean(axis=1)
      se = (values.std(axis=1, ddof=1) / np.sqrt(values.shape[1]) if values.shape[1] > 1
            else 0 * mean)
      ax.plot(epochs, mean, color=f"C{i}", **kw)
      ax.fill_between(epochs, mean - se, mean + se, color=f"C{i}", alpha=0.2, lw=0)
      return mean

    label = (f"{row['label']} ({row['fields']['hidden_size']}, n = {len(points[0])}"
             + (f", {more} more running" if more else "") + ")"
             + (f" [{row['setting']}]" if row["setting"] else ""))
    mean = band(by_epoch, "val_accuracy", 100.0, label=label)
    by_time.plot([np.mean([x["seconds"] for x in p]) for p in points], mean, color=f"C{i}")
    band(loss, "val_loss")
    drifting |= band(drift, workdir_lib.DRIFT_FIELD, label=row["label"]) is not None
  if runs:  # the reference's mean over seeds at the end of each epoch
    epochs = sorted(set.intersection(*(set(run) for run in runs.values())))
    by_epoch.plot(epochs, [100 * np.mean([run[e]["val_accuracy"] for run in runs.values()])
                           for e in epochs], color="k", ls="--", label=_REFERENCE_LABEL)
  for ax, x, y in ((by_epoch, "epochs", "validation accuracy (%)"),
                   (by_time, "wall-clock seconds", "validation accuracy (%)"),
                   (loss, "epochs", "validation cross-entropy"),
                   (drift, "epochs", "‖U − U₀‖_F / √n")):
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.grid(alpha=0.3)
  loss.set_yscale("log")
  by_epoch.legend(fontsize=7)
  if drifting:
    drift.legend(fontsize=7)
    drift.set_title("recurrent matrix from its initial value", fontsize=9)
  else:
    drift.set_axis_off()
  fig.suptitle(f"{task} {dataset}: mean over runs, band ± 1 s.e.")
  fig.tight_layout()
  return fig


def figures(results: Any, reference: Sequence[dict] = ()) -> dict:
  """The report's plots, as `matplotlib.figure.Figure` objects (save with ``fig.savefig``).

  Args:
    results: the records (a list of dicts or a DataFrame, as `load_results` returns them).
    reference: the PyTorch reference's records, drawn dashed beside the matching tasks.

  Returns:
    ``{"figure3_{task}_T{T}": Figure}``: validation loss (log scale) against steps, each
    row's median over runs and every run faintly, the random baseline dotted;
    ``{"images_{task}_{dataset}": Figure}``: validation accuracy, validation loss and
    (guRNN, orthogonal RNN) ‖U − U₀‖_F / √n against epochs (mean over the finished runs,
    or over all while none has finished; ± 1 s.e. band), and validation accuracy against
    wall-clock seconds.

  Raises:
    ValueError: a record names a task `lie_unitary.experiments.rnn.data` lacks.
  """
  records = workdir_lib.as_records(results)
  out = {f"figure3_{task}_T{T}": _loss_figure(task, T, rows)
         for (task, T), rows in _rows(records, images=False).items()}
  out.update({f"images_{task}_{dataset.replace('/', '_')}": _accuracy_figure(
      task, dataset, rows, _reference_runs(reference, task, dataset))
               for (task, dataset), rows in _rows(records, images=True).items()})
  return out


def markdown(results: Any, *, figure_files: dict | None = None,
             reference: Sequence[dict] = (), per_epoch: bool = True,
             anchors: bool = True) -> str:
  """The report's Markdown: a section per (task, T) or image task and dataset, a row per
  setting (its seeds' and replicates' runs pooled).

  Args:
    results: the records (a list of dicts or a DataFrame, as `load_results` returns them).
    figure_files: ``{figure key: file name}`` of figures saved beside the report; each
      gets an image link.
    reference: the PyTorch reference's records (seed, epoch, task, dataset, hidden,
      val_accuracy, test_accuracy, seconds).
    per_epoch: with the image tasks' test accuracy at every validation point.
    anchors: with the published MNIST table after image tables.

  Returns:
    The text. A synthetic task's row: its seeds and runs, the median and best final
    validation loss, the median test loss, the original code's (T = 100), steps and wall
    time. An image task's row: hidden size, parameters, seeds, n runs, epochs, and, as
    mean ± standard error over the runs, the best validation accuracy, the test accuracy
    there and the best test accuracy over epochs; then, for runs of 20 epochs or more,
    a line per run (its best epochs, accuracies, drift and wall time) and the test
    accuracy, training loss and validation loss averaged over blocks of 10
    epochs; the test accuracy at every
    validation point and, where recorded, ‖U − U₀‖_F / √n at every validation point; and
    the published MNIST table. An unfinished unit shows the same
    over its points so far.

  Raises:
    ValueError: a record names a task `lie_unitary.experiments.rnn.data` lacks.
  """
  figure_files = figure_files or {}
  records = workdir_lib.as_records(results)
  synthetic = [r for r in records if r.get("task") not in data.IMAGE_TASKS]
  sizes = sorted({int(r["eval_size"]) for r in synthetic if "eval_size" in r})
  sets = (f"{' / '.join(f'{n:,}' for n in sizes)} sequences each" if sizes
          else "their sizes not recorded")
  lines = ["# RNN results", ""]
  if synthetic:
    lines += [f"Final losses on the full validation and test sets ({sets}; median and best "
              "over the runs, a run: one seed's replicate); 'original run' is the final "
              "validation loss the original code's logged runs reached (T = 100 only).", ""]
  steps = [int(r["step"]) for r in synthetic if r.get("kind") == "final"]
  if steps and max(steps) < _SHORT_RUN_UPDATES:  # far less than the paper's 50,000 updates
    lines += [f"**A short run ({max(steps):,} updates at most, against the paper's 50,000): "
              "too short to learn these tasks; it checks that everything runs, and its "
              "losses are not results.**", ""]
  for (task, T), rows in _rows(records, images=False).items():
    lines += _loss_table(task, T, rows)
    if f"figure3_{task}_T{T}" in figure_files:
      lines += [f"![{task}, T = {T}]({figure_files[f'figure3_{task}_T{T}']})", ""]
  image_tables = _rows(records, images=True)
  for (task, dataset), rows in image_tables.items():
    runs = _reference_runs(reference, task, dataset)
    lines += _accuracy_table(task, dataset, rows, runs)
    lines += (_run_table(rows) + sum((_block_table(rows, runs, f) for f in _BLOCK_FIELDS), [])
              + _epoch_table(rows, runs) + _drift_table(rows) if per_epoch else [])
    key = f"images_{task}_{dataset.replace('/', '_')}"
    if key in figure_files:
      lines += [f"![{task} {dataset}]({figure_files[key]})", ""]
  if image_tables and anchors:
    lines += published_table()
  return "\n".join(lines)


def write_report(workdir: str, results: Any = None) -> list[str]:
  """Writes WORKDIR/report.md and a PNG per figure of `figures` (WORKDIR/{key}.png).

  Args:
    workdir: the experiment's working directory.
    results: the records; default: WORKDIR/results.jsonl's (`workdir.load_results`).

  Returns:
    The paths written: report.md first, then the PNGs.

  Raises:
    FileNotFoundError, ValueError: no results given and none in the workdir.
  """
  if results is None:
    results = workdir_lib.load_results(workdir, as_frame=False)
  results = workdir_lib.as_records(results)
  reference = workdir_lib.read(workdir, REFERENCE)
  paths, files = [], {}
  for key, fig in figures(results, reference).items():
    paths.append(os.path.join(workdir, f"{key}.png"))
    fig.savefig(paths[-1], dpi=120)
    files[key] = f"{key}.png"
  report = workdir_lib.path(workdir, workdir_lib.REPORT)
  with open(report, "w", encoding="utf-8") as f:
    f.write(markdown(results, figure_files=files, reference=reference))
  return [report] + paths
