"""The RNN family's report: Figure 3 and a loss table for the adding and memory problems
(paper §4); accuracy tables and curves for the sequential-image tasks.

A row is a setting: the units of one model and settings (a record's fields but its
seed), every seed's, their replicates pooled into runs (one run: a seed's replicate);
every "±" is `lie_unitary.experiments.report.SE`'s. Where one table has several rows of a
model, the row names the fields that tell them apart. `figures` and `markdown` take the
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

from lie_unitary.experiments import report as common
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import data

__all__ = ["ORIGINAL_FINAL_VAL", "REFERENCE", "best", "figures", "markdown", "published_table",
           "table_rows", "write_report"]

# The PyTorch reference's records in a workdir (benchmarks torch_reference's --out).
REFERENCE = "torch_reference.jsonl"
_REFERENCE_LABEL = "PyTorch expRNN reference"

# Final validation losses of the original code's logged runs at T = 100 (`published.json`).
ORIGINAL_FINAL_VAL = {(r["task"], r["model"]): r["final_val_loss"]
                      for r in common.published("original_runs")[1]}
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


def table_rows(records: Sequence[dict], images: bool) -> dict:
  """The "val" and "final" records of the synthetic (or `images`: the image) tasks as
  {(task, T) (images: (task, dataset)): [row]}, a row a setting: a dict of "model",
  "fields", "label", "setting" (what tells it from the same model's other rows, or ""),
  "seeds", "units" (their ids) and "runs" {(seed, replicate): {"val": {step: record},
  "final": record}}; of a record written twice the last counts."""
  out = collections.defaultdict(dict)
  for r in records:
    if r.get("kind") not in ("val", "final") or (r.get("task") in data.IMAGE_TASKS) != images:
      continue
    key = (r["task"], r.get("dataset", "?") if images else r["T"])
    fields = {k: v for k, v in r.items() if k not in _NOT_FIELDS and not k.startswith(_METRIC)}
    row = out[key].setdefault(repr(sorted(fields.items())), {
        "model": r["model"], "fields": fields, "seeds": set(), "units": set(),
        "runs": collections.defaultdict(lambda: {"val": {}, "final": None})})
    row["seeds"].add(r.get("seed", 0))
    row["units"].add(r.get("unit"))
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
  """"m ± s" (`common.pm`: the standard error with ddof 1) of `values` × `scale`.

  Args:
    values: floats (None entries are skipped), e.g. accuracies in [0, 1] with scale 100.
    scale: factor applied before formatting.
    digits: decimals of both numbers.

  Returns:
    "m ± s" for two or more values, the value alone for one, "—" for none.
  """
  return common.pm([scale * float(x) for x in values if x is not None],
                   lambda x: f"{x:.{digits}f}")


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


def best(points: Sequence[dict]) -> tuple[dict, float]:
  """Of a run's validation points after step 0: the first with the best validation
  accuracy, and the best test accuracy."""
  return (max(points, key=lambda r: r["val_accuracy"]),
          max(r["test_accuracy"] for r in points))


def _image_cells(runs: Sequence[Sequence[dict]]) -> list[str]:
  """Over runs (each its validation points): the best validation accuracy, the test
  accuracy there and the best test accuracy over epochs, as cells."""
  found = [best(points) for points in runs if points]
  return [mean_se([b["val_accuracy"] for b, _ in found]),
          mean_se([b["test_accuracy"] for b, _ in found]), mean_se([t for _, t in found])]


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
           f"Accuracy (%), {common.SE}: the best validation accuracy, the test accuracy at that "
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


_BLOCK_EPOCHS = 10
# The per-epoch fields of the curve tables: {field: (what it is, mean_se's scale, digits)}.
_CURVES = {
    "test_accuracy": ("Test accuracy (%)", 100.0, 2),
    "train_loss": ("Training loss (each epoch's mean over its batches)", 1.0, 3),
    "val_loss": ("Validation loss (the validation split)", 1.0, 3),
    workdir_lib.DRIFT_FIELD: ("How far the recurrent matrix is from its initial value, "
                              "‖U − U₀‖_F / √n (0 at the start, at most 2),", 1.0, 4),
}


def _curve_table(rows: list, runs: dict, field: str, width: int | None = None) -> list[str]:
  """`field` over training, a column per row that records it (and the reference, if its
  records do), mean ± standard error over the runs: at each validation point (`width`
  None), or averaged over blocks of `width` epochs (1-10, 11-20, ...: each run's mean over
  its evaluations in the block, then over the runs that finished the block, "(k of n)"
  when not all did; one evaluation picked out of many carries that evaluation's noise,
  a block's mean does not). [] when no row records `field`, or for blocks, unless some
  run finished two."""
  curves = [[[(float(r.get("epoch", 0)), r.get(field)) for r in run["val"].values()]
             for run in row["runs"].values()] for row in rows]
  labels = [_row_label(row) for row in rows]
  if runs:
    curves.append([[(float(e), r.get(field)) for e, r in run.items()] for run in runs.values()])
    labels.append(_REFERENCE_LABEL)
  kept = [i for i, c in enumerate(curves) if any(v is not None for run in c for _, v in run)]
  curves, labels = [curves[i] for i in kept], [labels[i] for i in kept]
  columns = [collections.defaultdict(list) for _ in curves]
  for column, c in zip(columns, curves):
    for curve in c:
      if width is None:
        for e, v in curve:
          column[round(e, 3)].append(v)
        continue
      for b in range(int(max((e for e, _ in curve), default=0.0) // width)):
        values = [v for e, v in curve if b * width < e <= (b + 1) * width and v is not None]
        if values:
          column[b].append(float(np.mean(values)))
  if not columns or (width and max(len(c) for c in columns) < 2):
    return []
  what, scale, digits = _CURVES[field]
  cell = lambda values, n: "—" if not values else mean_se(values, scale, digits) + (  # noqa: E731
      f" ({len(values)} of {n})" if width and len(values) < n else "")
  name = (lambda b: f"{b * width + 1}-{(b + 1) * width}") if width else "{:g}".format
  lines = [f"{what} at each validation point, {common.SE}:" if not width else
           f"{what} averaged over blocks of {width} epochs (each run's mean over the block's "
           f"evaluations), {common.SE}; a run counts once it has finished the block:", ""]
  return lines + common.table(
      ["epochs" if width else "epoch"] + labels,
      [[name(k)] + [cell(c.get(k, []), len(cs)) for c, cs in zip(columns, curves)]
       for k in sorted(set().union(*columns))])


def published_table() -> list[str]:
  """The published MNIST table (`published.json`'s "mnist"), beside any image table: a row
  per model and size, its source, a footnote per copy the numbers were read from."""
  info, rows = common.published("mnist")
  copies = list(dict.fromkeys(r["source"]["where"] for r in rows
                              if r["source"]["read_from_a_copy"]))
  others = list(dict.fromkeys(r["protocol"] for r in rows if r["protocol"] != info["protocol"]))
  star = "\\*"  # a footnote's mark, escaped for Markdown
  mark = lambda r: (star * (copies.index(r["source"]["where"]) + 1)  # noqa: E731
                    if r["source"]["read_from_a_copy"] else "") + (
      "†" * (others.index(r["protocol"]) + 1) if r["protocol"] in others else "")
  lines = [f"Published MNIST results, test accuracy (%): {info['protocol']}:", ""]
  lines += common.table(["model", "hidden", "parameters", "sMNIST", "psMNIST", "source"],
                        [[r["model"], r["hidden"], r["params"], r["smnist"], r["psmnist"],
                          r["source"]["cite"] + mark(r)] for r in rows])
  notes = [f"{star * (k + 1)} Read from {w}." for k, w in enumerate(copies)]
  notes += [f"{'†' * (k + 1)} Protocol: {p}." for k, p in enumerate(others)]
  return lines + [line for note in notes for line in (note, "")]


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
      return common.se_band(ax, epochs, [[scale * float(x[key]) for x in p] for p in points],
                            f"C{i}", **kw)

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
         for (task, T), rows in table_rows(records, images=False).items()}
  out.update({f"images_{task}_{dataset.replace('/', '_')}": _accuracy_figure(
      task, dataset, rows, _reference_runs(reference, task, dataset))
               for (task, dataset), rows in table_rows(records, images=True).items()})
  return out


def markdown(results: Any, *, figure_files: dict | None = None,
             reference: Sequence[dict] = (), per_epoch: bool = True,
             anchors: bool = True, launches: Sequence[dict] = ()) -> str:
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
    launches: the workdir's launches (`workdir.read_launches`): a table whose units were
      launched on different machines or device layouts says so (`common.machines_note`).

  Returns:
    The text. A synthetic task's row: its seeds and runs, the median and best final
    validation loss, the median test loss, the original code's (T = 100), steps and wall
    time. An image task's row: hidden size, parameters, seeds, n runs, epochs, and, as
    mean ± standard error over the runs, the best validation accuracy, the test accuracy
    there and the best test accuracy over epochs; then, for runs of 20 epochs or more,
    the test accuracy, training loss and validation loss averaged over blocks of 10
    epochs; the test accuracy and, where recorded, ‖U − U₀‖_F / √n at every validation
    point; and the published MNIST table. An unfinished unit shows the same over its
    points so far. Every "±" is `common.SE`'s.

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
  for (task, T), rows in table_rows(records, images=False).items():
    lines += _loss_table(task, T, rows) + _machines(launches, rows)
    if f"figure3_{task}_T{T}" in figure_files:
      lines += [f"![{task}, T = {T}]({figure_files[f'figure3_{task}_T{T}']})", ""]
  image_tables = table_rows(records, images=True)
  for (task, dataset), rows in image_tables.items():
    runs = _reference_runs(reference, task, dataset)
    lines += _accuracy_table(task, dataset, rows, runs) + _machines(launches, rows)
    if per_epoch:
      lines += sum((_curve_table(rows, runs, f, _BLOCK_EPOCHS) for f in list(_CURVES)[:3]), [])
      lines += (_curve_table(rows, runs, "test_accuracy")
                + _curve_table(rows, runs, workdir_lib.DRIFT_FIELD))
    key = f"images_{task}_{dataset.replace('/', '_')}"
    if key in figure_files:
      lines += [f"![{task} {dataset}]({figure_files[key]})", ""]
  if image_tables and anchors:
    lines += published_table()
  return "\n".join(lines)


def _machines(launches: Sequence[dict], rows: list) -> list[str]:
  return common.machines_note(launches, set().union(*(row["units"] for row in rows)) - {None})


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
  return common.write(workdir, figures(results, reference), lambda files: markdown(
      results, figure_files=files, reference=reference,
      launches=workdir_lib.read_launches(workdir)))
