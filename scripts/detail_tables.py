r"""Tables over a folder's records that answered one question each, beside its report:

- RNN image tasks: test accuracy, training loss and validation loss averaged over blocks
  of 10 epochs (each run's mean over the block's evaluations, then mean ± standard error
  over the runs that finished the block); the test accuracy and ‖U − U₀‖_F / √n at every
  validation point (each run on its own: `scripts/run_table.py`);
- operators: each trained approach's mean test loss over the noise floor's (the true
  U's); for real SO(n) targets, the replicates that ended in the det = −1 component; the
  closed-form baselines (procrustes, lstsq) against the truth, paired by replicate;
- basis: the cells where the learned basis did not recover span(G*), stuck or fitting
  its training pairs with a wrong span.

  python scripts/detail_tables.py results/psmnist_16k_70ep [FOLDER ...]
"""

import collections
import os
import sys

import numpy as np

_BLOCK_EPOCHS = 10
# The per-epoch fields of the RNN tables: {field: (what it is, scale, digits)}.
_CURVES = {
    "test_accuracy": ("Test accuracy (%)", 100.0, 2),
    "train_loss": ("Training loss (each epoch's mean over its batches)", 1.0, 3),
    "val_loss": ("Validation loss (the validation split)", 1.0, 3),
    "u_drift": ("How far the recurrent matrix is from its initial value, "
                "‖U − U₀‖_F / √n (0 at the start, at most 2),", 1.0, 4),
}


def curve_table(rows: list, field: str, width: int | None = None) -> list[str]:
  """`field` over training, a column per row of `rnn.report.table_rows` that records it
  (the PyTorch reference's too), mean ± standard error over the runs:
  at each validation point (`width` None), or averaged over blocks of `width` epochs
  (each run's mean over its evaluations in the block, then over the runs that finished
  the block, "(k of n)" when not all did: one evaluation picked out of many carries its
  noise, a block's mean does not). [] when no column records `field`, or for blocks,
  unless some run finished two."""
  from lie_unitary.experiments import report as common
  curves = [[[(float(r.get("epoch", 0)), r.get(field)) for r in run["val"].values()]
             for run in row["runs"].values()] for row in rows]
  labels = [row["name"] for row in rows]
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
  cell = lambda values, n: "—" if not values else common.pm(  # noqa: E731
      [scale * float(v) for v in values], f"{{:.{digits}f}}".format) + (
          f" ({len(values)} of {n})" if width and len(values) < n else "")
  name = (lambda b: f"{b * width + 1}-{(b + 1) * width}") if width else "{:g}".format
  lines = [f"{what} at each validation point, {common.SE}:" if not width else
           f"{what} averaged over blocks of {width} epochs (each run's mean over the block's "
           f"evaluations), {common.SE}; a run counts once it has finished the block:", ""]
  return lines + common.table(
      ["epochs" if width else "epoch"] + labels,
      [[name(k)] + [cell(c.get(k, []), len(cs)) for c, cs in zip(columns, curves)]
       for k in sorted(set().union(*columns))])


def rnn_lines(records, reference=()) -> list[str]:
  """Per image task and dataset: the block tables, then the test accuracy and drift at
  every validation point."""
  from lie_unitary.experiments.rnn import report
  out = []
  records = records + report.reference_records(reference, records)
  for (task, dataset), rows in report.table_rows(records, images=True).items():
    out += [f"### {task} {dataset}", ""]
    out += sum((curve_table(rows, f, _BLOCK_EPOCHS) for f in list(_CURVES)[:3]), [])
    out += curve_table(rows, "test_accuracy") + curve_table(rows, "u_drift")
  return out


def operators_lines(records) -> list[str]:
  """The test loss of each trained approach over the noise floor (the true U's loss),
  means over replicates, per task; for real SO(n) targets, how many projection_orthogonal
  replicates ended in the det = −1 component (test loss > 2: from there the best reachable
  is the target with one direction reflected, loss 4 + noise)."""
  from lie_unitary.experiments import report as common
  from lie_unitary.experiments.operators import report
  results = common.latest(records, "final", report.IDENTITY)
  out = []
  groups = report.groups(results)
  for (task, opt, lr, sched), group in sorted(groups.items(), key=repr):
    losses = collections.defaultdict(list)
    for r in group:
      key = (r["approach"], r["n"]) if r["optimizer"] != "none" else ("=" + r["approach"], r["n"])
      losses[key].append(float(r["test_loss"]))
    true = {n: np.mean(v) for (a, n), v in losses.items() if a == "=true"}
    trained = {(a, n): np.mean(v) for (a, n), v in losses.items()
               if n in true and not a.startswith("=")}
    cols = [a for a in report.ORDER if any(k[0] == a for k in trained)]
    if opt == "none" or not cols:
      continue
    out += [f"Test loss over the noise floor (the true U's loss), means over replicates: "
            f"{opt}, lr {lr:g}" + ("" if sched == "constant" else f", {sched} schedule")
            + report.differences(task, {k[0] for k in groups}) + ":", ""]
    out += common.table(["n"] + cols, [[str(n)] + [
        f"{trained[(a, n)] / true[n]:.3g}" if (a, n) in trained else "—" for a in cols]
        for n in sorted({n for _, n in trained})])
  stuck = collections.defaultdict(list)
  for r in results:
    if r["approach"] == "projection_orthogonal" and r.get("field") == "real":
      stuck[r["n"]].append(float(r["test_loss"]))
  if stuck:
    out += ["projection_orthogonal on real SO(n) targets: replicates that ended in the "
            "det = −1 component (test loss > 2):", ""]
    for n, losses in sorted(stuck.items()):
      wrong = [v for v in losses if v > 2]
      out.append(f"- n = {n}: {len(wrong)} of {len(losses)}"
                 + (f" (their mean test loss {np.mean(wrong):.3f})" if wrong else ""))
    out.append("")
  return out


def procrustes_lines(records) -> list[str]:
  """The closed-form baselines against the truth, paired by replicate (the same target and
  data): procrustes − true and lstsq − true, mean ± standard error over replicates, beside
  the expected excess of a least-squares fit over the noise floor, σ²·d/P (d its real
  dimensions: n² for U(n), 2n² for every complex matrix; for real targets n(n − 1)/2 for
  O(n), n² for every real matrix; P training pairs); then the best
  trained approach's final test loss − procrustes, with how many replicates sit above.
  One table per task with procrustes records; none without."""
  from lie_unitary.experiments import report as common
  from lie_unitary.experiments.operators import report
  results = common.latest(records, "final", report.IDENTITY)
  out = []
  tasks = {report.task_of(r) for r in results}
  for task in sorted(tasks, key=repr):
    loss = {(r["n"], r["approach"], r["optimizer"], r["replicate"]): float(r["test_loss"])
            for r in results if report.task_of(r) == task}
    fields = dict(task)
    per_n = sorted({k[0] for k in loss if k[1] == "procrustes"})
    if not per_n:
      continue
    sigma2, pairs = float(fields["noise_std"]) ** 2, int(fields["num_train"])
    real = fields["field"] == "real"  # x, noise and U real: floor nσ², O(n) and real matrices
    floor = (lambda n: n * sigma2) if real else (lambda n: 2 * n * sigma2)
    dims = (lambda n: (n * (n - 1) // 2, n * n)) if real else (lambda n: (n * n, 2 * n * n))
    rows = []
    for n in per_n:
      reps = sorted(k[3] for k in loss if k[:3] == (n, "procrustes", "none"))
      diff = lambda a, b, opt_a="none", opt_b="none": [
          loss[(n, a, opt_a, i)] - loss[(n, b, opt_b, i)] for i in reps
          if (n, a, opt_a, i) in loss and (n, b, opt_b, i) in loss]
      trained = {(a, opt): np.mean([v for k, v in loss.items() if k[:3] == (n, a, opt)])
                 for (m, a, opt, _) in loss if m == n and opt != "none"}
      best = ""
      if trained:
        (a, opt), _ = min(trained.items(), key=lambda kv: kv[1])
        gaps = diff(a, "procrustes", opt)
        best = (f"{a} ({opt}): {common.pm(gaps, '{:.2e}'.format)}, "
                f"{sum(g > 0 for g in gaps)} of {len(gaps)} above")
      d_procrustes, d_lstsq = dims(n)
      rows.append([str(n), f"{floor(n):.3g}",
                   f"{common.pm(diff('procrustes', 'true'), '{:.2e}'.format)} "
                   f"({sigma2 * d_procrustes / pairs:.2e})",
                   f"{common.pm(diff('lstsq', 'true'), '{:.2e}'.format)} "
                   f"({sigma2 * d_lstsq / pairs:.2e})", best or "—"])
    out += [f"Closed-form baselines over the truth, paired by replicate (expected excess "
            f"σ²·d/P in parentheses){report.differences(task, tasks)}:", ""]
    out += common.table(["n", f"noise floor {'n' if real else '2n'}σ²", "procrustes − true",
                         "lstsq − true",
                         "best trained − procrustes"], rows)
  return out


def basis_lines(records) -> list[str]:
  """Per cell, the learned replicates that did not recover span(G*) (largest angle ≥
  `report.RECOVERED`): stuck (training loss above twice the noise floor, the optimiser's
  failure, seen without test data) or fitting their training pairs with a wrong span; and
  how many have an operator whose generator has an eigenvalue of modulus > π."""
  from lie_unitary.experiments import report as common
  from lie_unitary.experiments.basis import config
  from lie_unitary.experiments.basis import report
  by_cell = collections.defaultdict(list)
  for r in common.latest(records, "final"):
    if r["approach"] == "learned":
      by_cell[tuple(r[f] for f in config.CELL_FIELDS)].append(r)
  rows = []
  for c, learned in sorted(by_cell.items()):
    failed = [r for r in learned if r["angle_max"] >= report.RECOVERED]
    if failed:
      stuck = sum(r["train_loss"] > 2 * r["noise_floor"] for r in failed)
      rows.append([*c, f"{len(failed)} of {len(learned)}", stuck, len(failed) - stuck,
                   sum(r.get("wrapped", 0) > 0 for r in failed)])
  if not rows:
    return []
  return ([f"Where the learned basis did not recover span(G*) (largest angle ≥ "
           f"{report.RECOVERED}):", ""]
          + common.table([*config.CELL_FIELDS, "failed", "stuck (train loss > 2 × floor)",
                          "fit the training pairs", "with an operator beyond ±π"], rows))


def lines(folder: str) -> list[str]:
  """The tables of `folder`'s family (told by its records' fields)."""
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.rnn import report
  records = workdir.load_results(folder, as_frame=False)
  if any("angle_max" in r for r in records):
    return basis_lines(records)
  if any("approach" in r for r in records):
    return operators_lines(records) + procrustes_lines(records)
  return rnn_lines(records, workdir.read(folder, report.REFERENCE))


def main(folders) -> int:
  if not folders:
    print(__doc__, file=sys.stderr)
    return 2
  for folder in folders:
    print(f"## {folder}\n")
    print("\n".join(lines(folder)))
  return 0


if __name__ == "__main__":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  sys.exit(main(sys.argv[1:]))
