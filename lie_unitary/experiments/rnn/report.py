"""The RNN family's report: Figure 3 and a loss table per (task, T) of the adding and
memory problems (paper §4); per image task, an accuracy table and figure, the PyTorch
reference (WORKDIR/torch_reference.jsonl) and the published MNIST table. A row pools the
runs of one model's units that share every field but the seed."""

from __future__ import annotations

import collections
import os
from typing import Any
from typing import Sequence

import numpy as np

from lie_unitary.experiments import report as common
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import data

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
# What a synthetic guRNN's label says of a field set unlike the paper's.
_NOTES = {("activation", "modrelu"): "modReLU", ("lambda_init", "phases"): "phases init",
          ("lambda_init_std", 0): "U = I init", ("lambda_optimizer", "rmsprop"): "λ: RMSProp"}
# Record keys that are not unit fields (a record: the unit's fields, then these).
_NOT_FIELDS = {"kind", "replicate", "step", "seconds", "epoch", "unit", "unit_name", "seed",
               "num_params", workdir_lib.DRIFT_FIELD, *workdir_lib.SPECTRUM_FIELDS}
_METRIC = ("val_", "test_", "train_", "best_")


def _label(fields: dict, images: bool) -> str:
  model = fields["model"]
  if images or not model.startswith("gurnn"):
    return (_IMAGE_LABELS if images else _LABELS).get(model, model)
  notes = [note for (k, v), note in _NOTES.items() if fields.get(k) == v]
  return _LABELS[model] + (f" ({', '.join(notes)})" if notes else "")


def _value(v) -> str:
  if isinstance(v, float):
    return f"{v:.4g}"
  return "(" + ", ".join(map(_value, v)) + ")" if isinstance(v, (list, tuple)) else str(v)


def table_rows(records: Sequence[dict], images: bool) -> dict:
  """{(task, T), or with `images` (task, dataset): [row]} of the "val" and "final" records,
  a row a dict of "model", "fields", "label", "setting" (the fields that tell it from the
  same model's other rows), "seeds", "units" and "runs" {(seed, replicate): {"val": {step:
  record}, "final": record}} (of a record written twice, the last)."""
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
  for key, rows in out.items():
    for row in rows.values():
      same = [o["fields"] for o in rows.values() if o["model"] == row["model"]]
      differ = sorted(k for k in set().union(*same) if any(f.get(k) != same[0].get(k)
                                                           for f in same))
      row["label"] = _label(row["fields"], images)
      row["setting"] = ", ".join(f"{k}={_value(row['fields'].get(k, '—'))}" for k in differ)
    models = list(_IMAGE_LABELS if images else _LABELS)
    out[key] = sorted(rows.values(), key=lambda r: (
        models.index(r["model"]) if r["model"] in models else 9, r["model"], r["setting"]))
  return dict(sorted(out.items()))


def _row_label(row: dict) -> str:
  return row["label"] + (f" [{row['setting']}]" if row["setting"] else "")


def best(points: Sequence[dict]) -> tuple[dict, float]:
  """Of a run's validation points: the first with the best validation accuracy, and the
  best test accuracy."""
  return (max(points, key=lambda r: r["val_accuracy"]),
          max(r["test_accuracy"] for r in points))


def reference_runs(reference: Sequence[dict], task: str, dataset: str) -> dict:
  """{seed: {epoch: record}} of the PyTorch reference's records of `task` on `dataset` (of
  a folder's path, its last part)."""
  name = lambda d: os.path.basename(str(d).rstrip("/"))
  runs = collections.defaultdict(dict)
  for r in reference:
    if r.get("task") == task and name(r.get("dataset", "")) == name(dataset):
      runs[r["seed"]][r["epoch"]] = r
  return runs


def _seeds(seeds) -> str:
  return ", ".join(map(str, sorted(seeds)))


def _loss(values: list, reduce) -> str:
  x = reduce(values) if values else None
  return "—" if x is None else f"{x:.4g}" if np.isfinite(x) else str(x)


def _loss_table(task: str, T: int, rows: list) -> list[str]:
  body = []
  for row in rows:
    finals = [run["final"] for run in row["runs"].values() if run["final"]]
    # Unfinished: each run's last subsample validation. NaN and inf are strings, read by float.
    ends = finals or [run["val"][max(run["val"])] for run in row["runs"].values() if run["val"]]
    val, test = [float(r["val_loss"]) for r in ends], [float(r["test_loss"]) for r in finals]
    original = [_ORIGINAL[(task, row["model"])]] if (task, row["model"]) in _ORIGINAL else []
    secs = max((r["seconds"] for r in finals if "seconds" in r), default=None)
    body.append([row["label"] + ("" if finals else " (unfinished, subsample)"),
                 row["setting"] or "—", _seeds(row["seeds"]), len(row["runs"]),
                 _loss(val, np.median), _loss(val, np.min), _loss(test, np.median),
                 _loss(original * (T == 100), min), max((r["step"] for r in ends), default=0),
                 "—" if secs is None else f"{float(secs):.0f}"])
  return [f"### {task}, T = {T} (random baseline {data.get_task(task).baseline(T):.4g})",
          ""] + common.table(["model", "setting", "seeds", "runs", "final val (median)",
                              "final val (best)", "test (median)", "original run (val)",
                              "steps", "wall time (s)"], body)


def _accuracy_table(task: str, dataset: str, rows: list, runs: dict) -> list[str]:
  pm = lambda values: common.pm([100 * float(x) for x in values], "{:.2f}".format)
  cells = lambda found: [pm(b["val_accuracy"] for b, _ in found),
                         pm(b["test_accuracy"] for b, _ in found), pm(t for _, t in found)]
  points = lambda run: [r for s, r in sorted(run["val"].items()) if s > 0]
  epochs = lambda ps: [max(p, key=lambda r: r["step"]).get("epoch", 0) if p else 0 for p in ps]
  span = lambda e: f"{min(e):g}" if min(e) == max(e) else f"{min(e):g}–{max(e):g}"
  body = []
  for row in rows:
    every = list(row["runs"].items())  # the finished runs once there are any, else all
    shown = [(key, run) for key, run in every if run["final"]] or every
    running = [(key, run) for key, run in every if not run["final"]]
    finals = [run["final"] for _, run in shown if run["final"]]
    shown_points = [points(run) for _, run in shown]
    at = span(epochs([p for p in shown_points if p]) or [0])
    if not finals:
      at += " (unfinished)"
    elif running:
      at += f"; {len(running)} more running, epoch {span(epochs(points(r) for _, r in running))}"
    params = f"{int(finals[0]['num_params']):,}" if finals and "num_params" in finals[0] else "—"
    secs = [max(r["seconds"] for r in p) for p in shown_points if p]
    body.append([row["label"], row["setting"] or "—", row["fields"]["hidden_size"], params,
                 _seeds({seed for (seed, _), _ in shown}), len(shown), at,
                 *cells([best(p) for p in shown_points if p]),
                 f"{np.median(secs):.0f}" if secs else "—"])
  if runs:
    hidden = {r.get("hidden") for run in runs.values() for r in run.values()}
    wall = np.median([max(r["seconds"] for r in run.values()) for run in runs.values()])
    body.append([REFERENCE_LABEL, "—", "/".join(map(str, sorted(hidden))), "—", _seeds(runs),
                 len(runs), max(max(run) for run in runs.values()),
                 *cells([best(list(run.values())) for run in runs.values()]), f"{wall:.0f}"])
  return ([f"### {'pixel-by-pixel' if task == 'pixel' else 'permuted pixel-by-pixel'} "
           f"{dataset} (T = 784)", "",
           f"Accuracy (%), {common.SE}: the best validation accuracy, the test accuracy at its "
           "epoch, and the best test accuracy over the epochs (the published protocol, without "
           "a validation split). A row with finished runs gives those, counting the others.", ""]
          + common.table(["model", "setting", "hidden", "parameters", "seeds", "n", "epochs",
                          "best val", "test at best val", "best test over epochs",
                          "wall time per unit (s)"], body)
          + ["A setting's field given as — is absent from that unit's records: the unit was "
             "recorded before the field existed.", ""] * any("=—" in r["setting"] for r in rows))


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
              lw=1.5, label=_row_label(row))
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
  fig, ax = common.figure((6.5, 4.2))
  for i, row in enumerate(rows):
    every = row["runs"].values()  # as the table's: a run just started cuts no curve short
    drawn = [run for run in every if run["final"]] or list(every)
    steps = sorted(set.intersection(*(set(run["val"]) for run in drawn)))
    if steps:
      common.se_band(ax, [drawn[0]["val"][s].get("epoch", 0) for s in steps],
                     [[100 * float(run["val"][s]["val_accuracy"]) for run in drawn]
                      for s in steps], f"C{i}", label=_row_label(row))
  if runs:  # the reference's mean over seeds at the end of each epoch
    epochs = sorted(set.intersection(*(set(run) for run in runs.values())))
    ax.plot(epochs, [100 * np.mean([run[e]["val_accuracy"] for run in runs.values()])
                     for e in epochs], color="k", ls="--", label=REFERENCE_LABEL)
  ax.set(xlabel="epochs", ylabel="validation accuracy (%)",
         title=f"{task} {dataset}: mean over runs, band ± 1 s.e.")
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  fig.tight_layout()
  return fig


def _sections(records: list, reference: Sequence[dict]):
  """(figure key, title, rows, table maker, figure maker, their arguments) per section."""
  for (task, T), rows in table_rows(records, images=False).items():
    yield (f"figure3_{task}_T{T}", f"{task}, T = {T}", rows, _loss_table, _loss_figure,
           (task, T, rows))
  for (task, dataset), rows in table_rows(records, images=True).items():
    yield (f"images_{task}_{dataset.replace('/', '_')}", f"{task} {dataset}", rows,
           _accuracy_table, _accuracy_figure,
           (task, dataset, rows, reference_runs(reference, task, dataset)))


def figures(results: Any, reference: Sequence[dict] = ()) -> dict:
  """{key: `matplotlib.figure.Figure`} of `results` (records or a DataFrame):
  ``figure3_{task}_T{T}``, validation loss against steps, each row's median and every run
  faintly; ``images_{task}_{dataset}``, validation accuracy against epochs, mean ± 1 s.e.
  (the finished runs, all while none has), `reference` dashed. ValueError: an unknown task."""
  return {key: figure(*args) for key, *_, figure, args
          in _sections(workdir_lib.as_records(results), reference)}


def markdown(results: Any, *, figure_files: dict | None = None,
             reference: Sequence[dict] = (), anchors: bool = True,
             launches: Sequence[dict] = ()) -> str:
  """The report's Markdown: the tables, `figure_files` ({key: file name}) linked, the
  PyTorch `reference`'s row, the published MNIST table (`anchors`) and a note where
  `launches` ran a table's units on different machines. ValueError: an unknown task."""
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
  images = False
  for key, title, rows, table, _, args in _sections(records, reference):
    lines += table(*args) + common.machines_note(
        launches, set().union(*(row["units"] for row in rows)) - {None})
    lines += [f"![{title}]({figure_files[key]})", ""] if key in (figure_files or {}) else []
    images |= key.startswith("images_")
  if anchors and images:
    lines += common.published_table("mnist")
  return "\n".join(lines)


def write_report(workdir: str, results: Any = None) -> list[str]:
  """WORKDIR/report.md and a WORKDIR/{key}.png per figure (`common.write_report`) of
  `results` (None: the workdir's records) and the workdir's PyTorch reference."""
  reference = workdir_lib.read(workdir, REFERENCE)
  return common.write_report(workdir, results, lambda r: figures(r, reference), markdown,
                             reference=reference)
