"""The RNN family's report: Figure 3 and a loss table per (task, T) of the adding and
memory problems (paper §4); an accuracy table and curves per sequential-image task, beside
the published MNIST table and the PyTorch reference (WORKDIR/torch_reference.jsonl).

A row is a setting: one model's units that share every field but the seed, their runs
pooled. Tables over epochs and per run: `scripts/detail_tables.py`, `scripts/run_table.py`.
"""

from __future__ import annotations

import collections
import functools
import os
from typing import Any
from typing import Sequence

import numpy as np

from lie_unitary.experiments import report as common
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import data

__all__ = ["REFERENCE", "REFERENCE_LABEL", "best", "epoch_range", "figures", "markdown",
           "mean_se", "published_table", "reference_runs", "row_label", "table_rows",
           "write_report"]

REFERENCE = "torch_reference.jsonl"  # the PyTorch reference's records in a workdir
REFERENCE_LABEL = "PyTorch expRNN reference"
# Final validation losses of the original code's logged runs at T = 100.
_ORIGINAL = {(r["task"], r["model"]): r["final_val_loss"]
             for r in common.published("original_runs")[1]}
_SHORT_RUN_UPDATES = 1_000  # fewer updates: the report says the run is too short to learn
_LABELS = {"gurnn": "guRNN₁", "gurnn_beta": "guRNN_β", "urnn": "ruRNN", "lstm": "LSTM",
           "irnn": "IRNN", "tanh": "tanh RNN", "free": "free 2n×2n RNN"}
_IMAGE_LABELS = {"gurnn": "guRNN (modReLU)", "orthogonal": "orthogonal RNN (expRNN's)",
                 "lstm": "LSTM"}
# Record keys that are not unit fields (a record: the unit's fields, then these).
_NOT_FIELDS = {"kind", "replicate", "step", "seconds", "epoch", "unit", "unit_name", "seed",
               "num_params", workdir_lib.DRIFT_FIELD, *workdir_lib.SPECTRUM_FIELDS}
_METRIC = ("val_", "test_", "train_", "best_")


def _label(fields: dict, images: bool) -> str:
  """A model's label; a synthetic guRNN's says what its setting changes from the paper's."""
  model = fields["model"]
  if images or not model.startswith("gurnn"):
    return (_IMAGE_LABELS if images else _LABELS).get(model, model)
  notes = ["modReLU"] * (fields.get("activation") == "modrelu")
  if fields.get("lambda_init") == "phases":
    notes.append("phases init")
  elif fields.get("lambda_init_std") == 0:
    notes.append("U = I init")
  if fields.get("lambda_optimizer") == "rmsprop":  # the configs' default is plain SGD on λ
    notes.append("λ: RMSProp")
  return _LABELS[model] + (f" ({', '.join(notes)})" if notes else "")


def _value(v) -> str:
  if isinstance(v, float):
    return f"{v:.4g}"
  return "(" + ", ".join(map(_value, v)) + ")" if isinstance(v, (list, tuple)) else str(v)


def table_rows(records: Sequence[dict], images: bool) -> dict:
  """The synthetic (`images`: image) tasks' "val" and "final" records as {(task, T) or
  (task, dataset): [row]}; a row a dict of "model", "fields", "label", "setting" (the
  fields that tell it from the same model's other rows), "seeds", "units" and "runs"
  {(seed, replicate): {"val": {step: record}, "final": record}} (a record written twice:
  the last)."""
  out = collections.defaultdict(dict)
  for r in records:
    if r.get("kind") not in ("val", "final") or (r.get("task") in data.IMAGE_TASKS) != images:
      continue
    fields = {k: v for k, v in r.items() if k not in _NOT_FIELDS and not k.startswith(_METRIC)}
    row = out[(r["task"], r.get("dataset", "?") if images else r["T"])].setdefault(
        repr(sorted(fields.items())), {
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
      differ = sorted(k for k in set().union(*same) if any(f.get(k) != same[0].get(k)
                                                           for f in same))
      row["label"] = _label(row["fields"], images)
      row["setting"] = ", ".join(f"{k}={_value(row['fields'].get(k, '—'))}" for k in differ)
    order = (lambda r: (list(_IMAGE_LABELS).index(r["model"]) if r["model"] in _IMAGE_LABELS
                        else 9, r["setting"])) if images else (
        lambda r: (r["model"], str(r["fields"].get("lambda_optimizer")), r["setting"]))
    tables[key] = sorted(rows, key=order)
  return tables


def row_label(row: dict) -> str:
  """A row's model label, with its setting in brackets when it has one."""
  return row["label"] + (f" [{row['setting']}]" if row["setting"] else "")


def mean_se(values, scale: float = 100.0, digits: int = 2) -> str:
  """`common.pm` of `values` × `scale` (None skipped), `digits` decimals."""
  return common.pm([scale * float(x) for x in values if x is not None],
                   lambda x: f"{x:.{digits}f}")


def epoch_range(epochs) -> str:
  """"E" when every epoch of `epochs` (floats, at least one) is E, else "E1–E2"."""
  lo, hi = min(epochs), max(epochs)
  return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"


def best(points: Sequence[dict]) -> tuple[dict, float]:
  """Of a run's validation points: the first with the best validation accuracy, and the
  best test accuracy."""
  return (max(points, key=lambda r: r["val_accuracy"]),
          max(r["test_accuracy"] for r in points))


def reference_runs(reference: Sequence[dict], task: str, dataset: str) -> dict:
  """{seed: {epoch: record}} of the PyTorch reference's records of `task` on `dataset` (of
  a folder's path, its last part)."""
  name = lambda d: os.path.basename(str(d).rstrip("/"))  # noqa: E731
  runs = collections.defaultdict(dict)
  for r in reference:
    if r.get("task") == task and name(r.get("dataset", "")) == name(dataset):
      runs[r["seed"]][r["epoch"]] = r
  return runs


def _seeds(seeds) -> str:
  return ", ".join(map(str, sorted(seeds)))


def _fmt(x) -> str:
  return "—" if x is None else (f"{x:.4g}" if np.isfinite(x) else str(x))


def _loss_table(task: str, T: int, rows: list) -> list[str]:
  body = []
  for row in rows:
    runs = row["runs"].values()
    finals = [run["final"] for run in runs if run["final"]]
    if finals:  # records store NaN / inf as strings, which float reads
      val, test = ([float(r[k]) for r in finals] for k in ("val_loss", "test_loss"))
      cells = [np.median(val), np.min(val), np.median(test)]
      steps = max(r["step"] for r in finals)
      secs = max((r["seconds"] for r in finals if "seconds" in r), default=None)
    else:  # unfinished: the last subsample validation
      last = [float(run["val"][max(run["val"])]["val_loss"]) for run in runs if run["val"]]
      cells = [np.median(last), np.min(last), None] if last else [None] * 3
      steps, secs = max((max(run["val"]) for run in runs if run["val"]), default=0), None
    cells.append(_ORIGINAL.get((task, row["model"])) if T == 100 else None)
    body.append([row["label"] + ("" if finals else " (unfinished, subsample)"),
                 row["setting"] or "—", _seeds(row["seeds"]), len(row["runs"]),
                 *map(_fmt, cells), steps, "—" if secs is None else f"{float(secs):.0f}"])
  return [f"### {task}, T = {T} (random baseline {data.get_task(task).baseline(T):.4g})",
          ""] + common.table(["model", "setting", "seeds", "runs", "final val (median)",
                              "final val (best)", "test (median)", "original run (val)",
                              "steps", "wall time (s)"], body)


def _image_cells(runs: Sequence[Sequence[dict]]) -> list[str]:
  found = [best(points) for points in runs if points]
  return [mean_se([b["val_accuracy"] for b, _ in found]),
          mean_se([b["test_accuracy"] for b, _ in found]), mean_se([t for _, t in found])]


def _shown(row: dict) -> tuple[list, list]:
  """The runs a row's table and curves give: the finished ones once there are any (a
  running one joins when it finishes), else every run so far; and the others."""
  every = list(row["runs"].items())
  finished = [(key, run) for key, run in every if run["final"]]
  return finished or every, [(key, run) for key, run in every if not run["final"]]


def _accuracy_table(task: str, dataset: str, rows: list, runs: dict) -> list[str]:
  lines = [f"### {'pixel-by-pixel' if task == 'pixel' else 'permuted pixel-by-pixel'} "
           f"{dataset} (T = 784)", "",
           f"Accuracy (%), {common.SE}: the best validation accuracy, the test accuracy at that "
           "epoch (chosen on the validation split), and the best test accuracy over the "
           "epochs (the published anchors' protocol, which has no validation split). Where some "
           "of a row's runs have finished, the row is theirs and says how many more are "
           "running.", ""]
  body = []
  points = lambda run: [r for s, r in sorted(run["val"].items()) if s > 0]  # noqa: E731
  last = lambda p: max(p, key=lambda r: r["step"]).get("epoch", 0) if p else 0  # noqa: E731
  for row in rows:
    shown, running = _shown(row)
    finals = [run["final"] for _, run in shown if run["final"]]
    shown_points = [points(run) for _, run in shown]
    epochs = sorted({last(p) for p in shown_points if p})
    epochs = epoch_range(epochs) if epochs else "0"
    if not finals:
      epochs += " (unfinished)"
    elif running:
      epochs += (f"; {len(running)} more running, epoch "
                 f"{epoch_range([last(points(run)) for _, run in running])}")
    params = f"{int(finals[0]['num_params']):,}" if finals and "num_params" in finals[0] else "—"
    secs = [max(r["seconds"] for r in p) for p in shown_points if p]
    body.append([row["label"], row["setting"] or "—", row["fields"]["hidden_size"], params,
                 _seeds({seed for (seed, _), _ in shown}), len(shown), epochs,
                 *_image_cells(shown_points), f"{np.median(secs):.0f}" if secs else "—"])
  if runs:
    hidden = {r.get("hidden") for run in runs.values() for r in run.values()}
    wall = np.median([max(r["seconds"] for r in run.values()) for run in runs.values()])
    body.append([REFERENCE_LABEL, "—", "/".join(map(str, sorted(hidden))), "—", _seeds(runs),
                 len(runs), max(max(run) for run in runs.values()),
                 *_image_cells([list(run.values()) for run in runs.values()]), f"{wall:.0f}"])
  lines += common.table(["model", "setting", "hidden", "parameters", "seeds", "n", "epochs",
                         "best val", "test at best val", "best test over epochs",
                         "wall time per unit (s)"], body)
  if any("=—" in row["setting"] for row in rows):
    lines += ["A setting's field given as — is absent from that unit's records: the unit "
              "was recorded before the field existed or entered a unit's identity.", ""]
  return lines


def published_table() -> list[str]:
  """The published MNIST table (`published.json`'s "mnist"): a row per model and size with
  its source, a footnote per copy the numbers were read from and per other protocol."""
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
  fig, ax = common.figure((6.5, 4.2))
  for i, row in enumerate(rows):
    curves = [dict(sorted((s, float(r["val_loss"])) for s, r in run["val"].items()))
              for run in row["runs"].values() if run["val"]]
    for c in curves:
      ax.plot(list(c), list(c.values()), color=f"C{i}", alpha=0.25, lw=0.7)
    steps = sorted(set.intersection(*map(set, curves))) if curves else []
    if steps:
      ax.plot(steps, [np.median([c[s] for c in curves]) for s in steps], color=f"C{i}",
              lw=1.5, label=row_label(row))
  baseline = data.get_task(task).baseline(T)
  ax.axhline(baseline, color="k", ls=":", lw=1, label="random baseline")
  # Log scale, capped: divergent runs (the IRNN on memory reaches 1e15) flatten the others.
  batch = {row["fields"].get("batch_size") for row in rows} - {None}
  ax.set(yscale="log", ylim=(None, min(ax.get_ylim()[1], 20 * baseline)),
         title=f"{task} problem, T = {T}",
         ylabel="validation " + ("MSE" if task == "adding" else "cross-entropy"),
         xlabel=f"steps (batches of {batch.pop()})" if len(batch) == 1 else "steps")
  ax.legend(fontsize=8)
  fig.tight_layout()
  return fig


def _accuracy_figure(task: str, dataset: str, rows: list, runs: dict):
  fig, ((by_epoch, by_time), (loss, drift)) = common.figure((10, 7.5), 2, 2)
  drifting = False
  for i, row in enumerate(rows):
    drawn, running = _shown(row)  # as the table: a run just started cuts no curve short
    steps = sorted(set.intersection(*(set(run["val"]) for _, run in drawn)))
    if not steps:
      continue
    points = [[run["val"][s] for _, run in drawn] for s in steps]
    epochs = [p[0].get("epoch", 0) for p in points]

    def band(ax, key, scale=1.0, **kw):  # nothing when a point lacks the field
      if all(key in x for p in points for x in p):
        return common.se_band(ax, epochs, [[scale * float(x[key]) for x in p] for p in points],
                              f"C{i}", **kw)

    more = len(running) if len(drawn) < len(row["runs"]) else 0
    label = (f"{row['label']} ({row['fields']['hidden_size']}, n = {len(drawn)}"
             + (f", {more} more running" if more else "") + ")"
             + (f" [{row['setting']}]" if row["setting"] else ""))
    mean = band(by_epoch, "val_accuracy", 100.0, label=label)
    by_time.plot([np.mean([x["seconds"] for x in p]) for p in points], mean, color=f"C{i}")
    band(loss, "val_loss")
    drifting |= band(drift, workdir_lib.DRIFT_FIELD, label=row["label"]) is not None
  if runs:  # the reference's mean over seeds at the end of each epoch
    epochs = sorted(set.intersection(*(set(run) for run in runs.values())))
    by_epoch.plot(epochs, [100 * np.mean([run[e]["val_accuracy"] for run in runs.values()])
                           for e in epochs], color="k", ls="--", label=REFERENCE_LABEL)
  for ax, x, y in ((by_epoch, "epochs", "validation accuracy (%)"),
                   (by_time, "wall-clock seconds", "validation accuracy (%)"),
                   (loss, "epochs", "validation cross-entropy"),
                   (drift, "epochs", "‖U − U₀‖_F / √n")):
    ax.set(xlabel=x, ylabel=y)
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


def _sections(records: list, reference: Sequence[dict]) -> list[tuple]:
  """(figure key, title, rows, table maker, figure maker) per (task, T), then per image
  task and dataset."""
  out = [(f"figure3_{task}_T{T}", f"{task}, T = {T}", rows,
          functools.partial(_loss_table, task, T, rows),
          functools.partial(_loss_figure, task, T, rows))
         for (task, T), rows in table_rows(records, images=False).items()]
  for (task, dataset), rows in table_rows(records, images=True).items():
    args = (task, dataset, rows, reference_runs(reference, task, dataset))
    out.append((f"images_{task}_{dataset.replace('/', '_')}", f"{task} {dataset}", rows,
                functools.partial(_accuracy_table, *args),
                functools.partial(_accuracy_figure, *args)))
  return out


def figures(results: Any, reference: Sequence[dict] = ()) -> dict:
  """The report's `matplotlib.figure.Figure`s (no pyplot) of `results` (records or a
  DataFrame): ``figure3_{task}_T{T}``, validation loss against steps, each row's median
  and every run faintly; ``images_{task}_{dataset}``, validation accuracy, loss and
  ‖U − U₀‖_F / √n against epochs (mean ± 1 s.e. over the finished runs, all while none
  has; `reference` dashed), accuracy against wall-clock seconds.

  Raises:
    ValueError: a record names a task `rnn.data` lacks.
  """
  return {key: figure() for key, *_, figure in _sections(workdir_lib.as_records(results),
                                                         reference)}


def markdown(results: Any, *, figure_files: dict | None = None,
             reference: Sequence[dict] = (), anchors: bool = True,
             launches: Sequence[dict] = ()) -> str:
  """The report's Markdown: a table per (task, T) and per image task and dataset, with
  `figure_files` ({figure key: file name}) linked, a row of the PyTorch `reference`'s
  records, the published MNIST table (`anchors`) and a note where `launches`
  (`workdir.read_launches`) ran a table's units on different machines.

  Raises:
    ValueError: a record names a task `rnn.data` lacks.
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
  sections = _sections(records, reference)
  for key, title, rows, table, _ in sections:
    lines += table() + common.machines_note(
        launches, set().union(*(row["units"] for row in rows)) - {None})
    if key in figure_files:
      lines += [f"![{title}]({figure_files[key]})", ""]
  if anchors and any(key.startswith("images_") for key, *_ in sections):
    lines += published_table()
  return "\n".join(lines)


def write_report(workdir: str, results: Any = None) -> list[str]:
  """Writes WORKDIR/report.md and WORKDIR/{key}.png per figure (`common.write_report`) from
  `results` (default: the workdir's records) and the workdir's PyTorch reference; raises
  as `common.write_report`."""
  reference = workdir_lib.read(workdir, REFERENCE)
  return common.write_report(workdir, results, lambda r: figures(r, reference), markdown,
                             reference=reference)
