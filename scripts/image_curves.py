r"""Beside an RNN folder's report, per sequential-image table: the validation loss and
‖U − U₀‖_F / √n (how far the recurrent matrix moved from its initial value) against epochs,
and the validation accuracy against wall-clock seconds; each row's mean over its finished
runs (all runs while none has), in a band of ± 1 standard error. Writes
FOLDER/curves_{task}_{dataset}.png.

  python scripts/image_curves.py results/psmnist_16k_70ep
"""

import os
import sys

import numpy as np


def curves_figure(rows: list):
  """The three panels of one image table's rows (`rnn.report.table_rows`)."""
  from lie_unitary.experiments import report as common
  from lie_unitary.experiments import workdir

  fig, (loss, drift, by_time) = common.figure((13, 4), 1, 3)
  for i, row in enumerate(rows):
    runs = [run for run in row["runs"].values() if run["final"]] or list(row["runs"].values())
    steps = sorted(set.intersection(*(set(run["val"]) for run in runs)))
    points = [[run["val"][s] for run in runs] for s in steps]
    epochs = [p[0].get("epoch", 0) for p in points]
    for ax, field in ((loss, "val_loss"), (drift, workdir.DRIFT_FIELD)):
      if points and all(field in x for p in points for x in p):  # none where a point lacks it
        common.se_band(ax, epochs, [[float(x[field]) for x in p] for p in points], f"C{i}",
                       label=row["name"])
    if points:
      common.se_band(by_time, [np.mean([x["seconds"] for x in p]) for p in points],
                     [[100 * float(x["val_accuracy"]) for x in p] for p in points], f"C{i}")
  for ax, x, y in ((loss, "epochs", "validation cross-entropy"),
                   (drift, "epochs", "‖U − U₀‖_F / √n"),
                   (by_time, "wall-clock seconds", "validation accuracy (%)")):
    ax.set(xlabel=x, ylabel=y)
    ax.grid(alpha=0.3)
  loss.set_yscale("log")
  loss.legend(fontsize=7)
  fig.tight_layout()
  return fig


def main(folders) -> int:
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.rnn import report
  if not folders:
    print(__doc__, file=sys.stderr)
    return 2
  for folder in folders:
    try:
      records = [] if folder.startswith("-") else workdir.load_results(folder, as_frame=False)
    except (FileNotFoundError, ValueError) as e:  # no workdir, no records
      print(f"{folder}: {e}", file=sys.stderr)
      return 2
    if not report.table_rows(records, images=True):
      print(__doc__ if folder.startswith("-") else f"{folder}: no sequential-image records",
            file=sys.stderr)
      return 2
    for (task, dataset), rows in report.table_rows(records, images=True).items():
      path = os.path.join(folder, f"curves_{task}_{dataset.replace('/', '_')}.png")
      curves_figure(rows).savefig(path, dpi=110)
      print(f"wrote {path}")
  return 0


if __name__ == "__main__":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  sys.exit(main(sys.argv[1:]))
