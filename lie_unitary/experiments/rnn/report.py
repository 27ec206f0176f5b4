"""The RNN family's report: Figure 3 and a loss table per (task, T) of the adding and
memory problems (paper §4); per image task, an accuracy table and figure with the PyTorch
reference (WORKDIR/torch_*.jsonl), and the published MNIST table."""

import collections
import glob
import os
from typing import Any
from typing import Sequence

import numpy as np

from lie_unitary.experiments import report as common
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import data

REFERENCE = "torch_reference.jsonl"  # the PyTorch reference's records in a workdir
REFERENCE_FILES = "torch_*.jsonl"  # every file of them, e.g. a run of 300 updates beside it
# The reference's full epoch: every batch of 128 of the 55,000 training images, as ours.
_REFERENCE_EPOCH_UPDATES = 55_000 // 128
REFERENCE_LABEL = "PyTorch expRNN reference"
# Final validation losses of the original code's logged runs at T = 100.
_ORIGINAL = {(r["task"], r["model"]): r["final_val_loss"]
             for r in common.published("original_runs")[1]}
_SHORT_RUN_UPDATES = 1_000  # fewer updates: the report says the run is too short to learn
_LABELS = {"gurnn": "guRNN₁", "gurnn_beta": "guRNN_β", "urnn": "ruRNN", "lstm": "LSTM",
           "irnn": "IRNN", "tanh": "tanh RNN", "free": "free 2n×2n RNN"}
_IMAGE_LABELS = {"gurnn": "guRNN (modReLU)", "orthogonal": "orthogonal RNN (expRNN's)",
                 "lstm": "LSTM", "torch": REFERENCE_LABEL}
# What a synthetic guRNN's label says of a field set unlike the paper's.
_NOTES = {("activation", "modrelu"): "modReLU", ("lambda_init", "phases"): "phases init",
          ("lambda_init_std", 0): "U = I init", ("lambda_optimizer", "rmsprop"): "λ: RMSProp"}
# Record keys that are not unit fields (a record: the unit's fields, then these).
_NOT_FIELDS = {"kind", "replicate", "step", "seconds", "epoch", "unit", "unit_name", "seed",
               "num_params", workdir_lib.DRIFT_FIELD, *workdir_lib.SPECTRUM_FIELDS}
_METRIC = ("val_", "test_", "train_", "best_")


def _value(v) -> str:
  if isinstance(v, float):
    return f"{v:.4g}"
  return "(" + ", ".join(map(_value, v)) + ")" if isinstance(v, (list, tuple)) else str(v)


def table_rows(records: Sequence[dict], images: bool) -> dict:
  """{(task, T), or with `images` (task, dataset): [row]}, a row one model's units alike but
  for the seed: {"model", "fields", "label", "setting" (fields unlike its other rows'), "name",
  "seeds", "units", "runs": {(seed, replicate): {"val": {step: record}, "final": record}}}."""
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
      run["final"] = r  # of a record written twice, the last
  labels = _IMAGE_LABELS if images else _LABELS
  for key, rows in out.items():
    for row in rows.values():
      same = [o["fields"] for o in rows.values() if o["model"] == row["model"]]
      differ = sorted(k for k in set().union(*same) if any(f.get(k) != same[0].get(k)
                                                           for f in same))
      row["setting"] = ", ".join(f"{k}={_value(row['fields'].get(k, '—'))}" for k in differ)
      notes = [n for (k, v), n in _NOTES.items() if not images
               and row["model"].startswith("gurnn") and row["fields"].get(k) == v]
      row["label"] = labels.get(row["model"], row["model"]) + (
          f" ({', '.join(notes)})" if notes else "")
      row["name"] = row["label"] + (f" [{row['setting']}]" if row["setting"] else "")
    out[key] = sorted(rows.values(), key=lambda r: (
        list(labels).index(r["model"]) if r["model"] in labels else 9, r["model"], r["setting"]))
  return dict(sorted(out.items()))


def read_reference(workdir: str) -> list[dict]:
  """Every record of the PyTorch reference's files in `workdir` (`REFERENCE_FILES`, in
  name order; [] where there are none)."""
  return [r for path in sorted(glob.glob(os.path.join(workdir, REFERENCE_FILES)))
          for r in workdir_lib.read(workdir, os.path.basename(path))]


def reference_records(reference: Sequence[dict], records: Sequence[dict]) -> list[dict]:
  """The PyTorch reference's records of the image tables of `records` as records of model
  "torch" (its dataset a folder's last part): a seed's epochs its steps, the last its final.
  A record's `updates_per_epoch` (absent: a full epoch) makes its epoch ours: 300 updates
  are epoch 0.6993."""
  name = lambda d: os.path.basename(str(d).rstrip("/"))
  tables = {(r.get("task"), r.get("dataset")) for r in records}
  epoch = lambda r: round(r["epoch"] * (r.get("updates_per_epoch") or _REFERENCE_EPOCH_UPDATES)
                          / _REFERENCE_EPOCH_UPDATES, 4)
  return [dict(r, model="torch", dataset=name(r["dataset"]), hidden_size=r.get("hidden"),
               replicate=0, step=r["epoch"], epoch=epoch(r), kind=kind) for r in reference
          if (r.get("task"), name(r.get("dataset", ""))) in tables for kind in ("val", "final")]


def best(points: Sequence[dict]) -> tuple[dict, float]:
  """A run's first point of best validation accuracy, and its best test accuracy."""
  return (max(points, key=lambda r: r["val_accuracy"]), max(r["test_accuracy"] for r in points))


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
                 row["setting"] or "—", ", ".join(map(str, sorted(row["seeds"]))), len(row["runs"]),
                 _loss(val, np.median), _loss(val, np.min), _loss(test, np.median),
                 _loss(original * (T == 100), min), max((r["step"] for r in ends), default=0),
                 "—" if secs is None else f"{float(secs):.0f}"])
  sizes = sorted({row["fields"]["eval_size"] for row in rows if "eval_size" in row["fields"]})
  return [f"### {task}, T = {T} (random baseline {data.get_task(task).baseline(T):.4g}; sets "
          f"of {' / '.join(f'{n:,}' for n in sizes) or '?'} sequences)", ""] + common.table(
              ["model", "setting", "seeds", "runs (a seed's replicate each)", "final val (median)",
               "final val (best)", "test (median)", "original run (val, the paper's code)",
               "steps", "wall time (s)"], body)


def _accuracy_table(task: str, dataset: str, rows: list) -> list[str]:
  pm = lambda values: common.pm([100 * float(x) for x in values], "{:.2f}".format)
  points = lambda run: [r for s, r in sorted(run["val"].items()) if s > 0]
  last = lambda runs: [max(r.get("epoch", 0) for r in p) for p in runs if p]
  span = lambda e: f"{min(e):g}" if min(e) == max(e) else f"{min(e):g}–{max(e):g}"
  body = []
  for row in rows:
    shown = [(key, run) for key, run in row["runs"].items() if run["final"]]
    shown = shown or list(row["runs"].items())  # the finished runs once there are any
    finals = [run["final"] for _, run in shown if run["final"]]
    running = [points(run) for run in row["runs"].values() if not run["final"]]
    found = [best(points(run)) for _, run in shown if points(run)]
    at = span(last(points(run) for _, run in shown) or [0]) + (
        " (unfinished)" if not finals else f"; {len(running)} more running, epoch "
        f"{span(last(running) or [0])}" if running else "")
    params = f"{int(finals[0]['num_params']):,}" if finals and "num_params" in finals[0] else "—"
    secs = [max(r["seconds"] for r in points(run)) for _, run in shown if points(run)]
    body.append([row["label"], row["setting"] or "—", row["fields"]["hidden_size"], params,
                 ", ".join(map(str, sorted({seed for (seed, _), _ in shown}))), len(shown), at,
                 pm(b["val_accuracy"] for b, _ in found), pm(b["test_accuracy"] for b, _ in found),
                 pm(t for _, t in found), f"{np.median(secs):.0f}" if secs else "—"])
  return ([f"### {task} {dataset} (T = 784)", "",
           f"Accuracy (%), {common.SE}: the best validation accuracy, the test accuracy at its "
           "epoch, the best test accuracy over the epochs (the published protocol); a row's "
           "finished runs once there are any.", ""]
          + common.table(["model", "setting", "hidden", "parameters", "seeds", "n", "epochs",
                          "best val", "test at best val", "best test over epochs",
                          "wall time per unit (s)"], body)
          + ["A setting's field given as — is absent from its unit's records: recorded before it "
             "existed or was in a unit's identity.", ""] * any("=—" in r["setting"] for r in rows))


def _curves(rows: list, field: str, scale: float = 1.0):
  """Per row: colour, name, records and `field` × `scale` (steps × runs) at its runs' steps."""
  for i, row in enumerate(rows):
    runs = [run for run in row["runs"].values() if run["final"]] or row["runs"].values()
    runs = [run["val"] for run in runs]  # as the tables: the finished runs once there are any
    steps = sorted(set.intersection(*map(set, runs))) if runs else []
    if steps:
      yield (f"C{i}", row["name"], [runs[0][s] for s in steps],
             np.array([[scale * float(run[s][field]) for run in runs] for s in steps]))


def _loss_figure(task: str, T: int, rows: list):
  fig, ax = common.figure((6.5, 4.2))
  for color, name, points, values in _curves(rows, "val_loss"):
    ax.plot([r["step"] for r in points], values, color=color, alpha=0.25, lw=0.7)
    ax.plot([r["step"] for r in points], np.median(values, axis=1), color=color, lw=1.5, label=name)
  baseline = data.get_task(task).baseline(T)
  ax.axhline(baseline, color="k", ls=":", lw=1, label="random baseline")
  # Log scale, capped: divergent runs (the IRNN on memory reaches 1e15) flatten the others.
  ax.set(yscale="log", ylim=(None, min(ax.get_ylim()[1], 20 * baseline)), xlabel="steps",
         ylabel="validation " + ("MSE" if task == "adding" else "cross-entropy"),
         title=f"{task} problem, T = {T}")
  ax.legend(fontsize=8)
  fig.tight_layout()
  return fig


def _accuracy_figure(task: str, dataset: str, rows: list):
  fig, ax = common.figure((6.5, 4.2))
  for color, name, points, values in _curves(rows, "val_accuracy", 100.0):
    common.se_band(ax, [r.get("epoch", 0) for r in points], values, color, label=name)
  ax.set(xlabel="epochs", ylabel="validation accuracy (%)",
         title=f"{task} {dataset}: mean over runs, band ± 1 s.e.")
  ax.grid(alpha=0.3)
  ax.legend(fontsize=7)
  fig.tight_layout()
  return fig


def _sections(records: list, reference: Sequence[dict]):
  """(figure key, title, table maker, figure maker, (task, T or dataset, rows)) per table."""
  for (task, T), rows in table_rows(records, images=False).items():
    yield f"figure3_{task}_T{T}", f"{task}, T = {T}", _loss_table, _loss_figure, (task, T, rows)
  images = table_rows(records + reference_records(reference, records), images=True)
  for (task, dataset), rows in images.items():
    yield (f"images_{task}_{dataset.replace('/', '_')}", f"{task} {dataset}", _accuracy_table,
           _accuracy_figure, (task, dataset, rows))


def figures(results: Any, reference: Sequence[dict] = ()) -> dict:
  """{"figure3_{task}_T{T}" or "images_{task}_{dataset}": Figure} of `results` (records or a
  DataFrame) and the PyTorch `reference`'s records. ValueError: an unknown task."""
  return {key: figure(*args) for key, _, _, figure, args
          in _sections(workdir_lib.as_records(results), reference)}


def markdown(results: Any, *, figure_files: dict | None = None,
             reference: Sequence[dict] = (), anchors: bool = True,
             launches: Sequence[dict] = ()) -> str:
  """The report: the tables, `figure_files` ({key: file name}), the published MNIST table
  (`anchors`), a note where `launches` differ in machine. ValueError: an unknown task."""
  records = workdir_lib.as_records(results)
  synthetic = [r for r in records if r.get("task") not in data.IMAGE_TASKS]
  lines = ["# RNN results", ""]
  steps = [int(r["step"]) for r in synthetic if r.get("kind") == "final"]
  if steps and max(steps) < _SHORT_RUN_UPDATES:  # far less than the paper's 50,000 updates
    lines += [f"**A short run ({max(steps):,} updates at most, against the paper's 50,000): "
              "too short to learn these tasks; its losses are not results.**", ""]
  for key, title, table, _, args in _sections(records, reference):
    lines += table(*args) + common.machines_note(
        launches, set().union(*(row["units"] for row in args[2])) - {None})
    lines += [f"![{title}]({figure_files[key]})", ""] if key in (figure_files or {}) else []
  images = len(synthetic) < len(records)
  return "\n".join(lines + common.published_table("mnist") * (anchors and images))


def write_report(workdir: str, results: Any = None) -> list[str]:
  """`common.write_report` of `results` (None: the workdir's) and its PyTorch reference."""
  reference = read_reference(workdir)
  return common.write_report(workdir, results, lambda r: figures(r, reference), markdown,
                             reference=reference)
