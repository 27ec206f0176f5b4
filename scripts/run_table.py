r"""Each run of a sequential-image experiment on its own: a line per run (a seed's replicate)
with its epochs, its best validation accuracy and that epoch (the first, on ties), the
test accuracy there, its best test accuracy and that epoch, ‖U − U₀‖_F / √n at its last
point and its wall time; a run without its final record is marked running.

  python scripts/run_table.py results/psmnist_16k_70ep [FOLDER ...]
"""

import os
import sys


def lines(records) -> list[str]:
  """The Markdown table of every image table of `records` (`workdir.load_results`'s)."""
  from lie_unitary.experiments import report as common
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.rnn import report

  drift, out = workdir.DRIFT_FIELD, []
  epoch = lambda r: f"{float(r.get('epoch', 0)):g}"  # noqa: E731
  for (task, dataset), rows in report.table_rows(records, images=True).items():
    body = []
    for row in rows:
      for (seed, replicate), run in sorted(row["runs"].items()):
        points = [r for s, r in sorted(run["val"].items()) if s > 0]
        if not points:
          continue
        best_val = max(points, key=lambda r: r["val_accuracy"])  # the first, on ties
        best_test = max(points, key=lambda r: r["test_accuracy"])
        last = points[-1]
        body.append([row["name"], seed, replicate,
                     epoch(last) + ("" if run["final"] else " (running)"),
                     f"{100 * best_val['val_accuracy']:.2f}", epoch(best_val),
                     f"{100 * best_val['test_accuracy']:.2f}",
                     f"{100 * best_test['test_accuracy']:.2f}", epoch(best_test),
                     f"{last[drift]:.4f}" if drift in last else "—",
                     f"{last['seconds']:.0f}"])
    out += [f"### {task} {dataset}: each run on its own (accuracy %)", ""] + common.table(
        ["model", "seed", "replicate", "epochs", "best val", "at epoch", "test at best val",
         "best test", "at epoch", "‖U − U₀‖_F / √n", "wall time (s)"], body)
  return out


def main(folders) -> int:
  from lie_unitary.experiments import workdir
  if not folders:
    print(__doc__, file=sys.stderr)
    return 2
  for folder in folders:
    try:
      text = [] if folder.startswith("-") else lines(workdir.load_results(folder, as_frame=False))
    except (FileNotFoundError, ValueError) as e:  # no workdir, no records
      print(f"{folder}: {e}", file=sys.stderr)
      return 2
    if not text:
      print(__doc__ if folder.startswith("-") else f"{folder}: no sequential-image records",
            file=sys.stderr)
      return 2
    print(f"## {folder}\n")
    print("\n".join(text))
  return 0


if __name__ == "__main__":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  sys.exit(main(sys.argv[1:]))
