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

With the guRNN and the orthogonal RNN in a folder (one setting each), a table of their gap
per block in combined standard errors; given two or more RNN folders of one task (two
sizes, say), the gaps side by side and the last's minus the first's.
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


def _records(row: dict, field: str) -> bool:
  """Whether a row of `rnn.report.table_rows` records `field` at any validation point."""
  return any(r.get(field) is not None for run in row["runs"].values() for r in run["val"].values())


def _column(row: dict, field: str, width: int | None) -> dict:
  """{epoch (`width` None) or block index: [a value per run]} of `field` for one row: at
  each validation point, or each run's mean over a block of `width` epochs it finished."""
  column = collections.defaultdict(list)
  for run in row["runs"].values():
    curve = [(float(r.get("epoch", 0)), r.get(field)) for r in run["val"].values()]
    if width is None:
      for e, v in curve:
        column[round(e, 3)].append(v)
      continue
    for b in range(int(max((e for e, _ in curve), default=0.0) // width)):
      values = [v for e, v in curve if b * width < e <= (b + 1) * width and v is not None]
      if values:
        column[b].append(float(np.mean(values)))
  return column


def curve_table(rows: list, field: str, width: int | None = None) -> list[str]:
  """`field` over training, a column per row of `rnn.report.table_rows` that records it
  (the PyTorch reference's too), mean ± standard error over the runs:
  at each validation point (`width` None), or averaged over blocks of `width` epochs
  (each run's mean over its evaluations in the block, then over the runs that finished
  the block, "(k of n)" when not all did: one evaluation picked out of many carries its
  noise, a block's mean does not). [] when no column records `field`, or for blocks,
  unless some run finished two."""
  from lie_unitary.experiments import report as common
  kept = [(row["name"], row) for row in rows if _records(row, field)]
  labels = [label for label, _ in kept]
  curves = [len(row["runs"]) for _, row in kept]
  columns = [_column(row, field, width) for _, row in kept]
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
      [[name(k)] + [cell(c.get(k, []), n) for c, n in zip(columns, curves)]
       for k in sorted(set().union(*columns))])


_PAIR = ("gurnn", "orthogonal")  # the gap tables: the first's mean minus the second's


def block_gaps(rows: list, field: str) -> dict:
  """{block index: (d, s, n₁, n₂)}: guRNN − orthogonal RNN in `field` averaged over blocks
  of 10 epochs, d the difference of their means (each over the runs that finished the
  block, of each run's block mean) and s = √(s₁² + s₂²) the combined standard error, for
  blocks where both have two or more runs; {} unless each model has exactly one row."""
  from lie_unitary.experiments import report as common
  pair = [[row for row in rows if row["model"] == model] for model in _PAIR]
  if any(len(p) != 1 for p in pair):
    return {}
  a, b = (_column(p[0], field, _BLOCK_EPOCHS) for p in pair)
  out = {}
  for k in sorted(set(a) & set(b)):
    (ma, sa, na), (mb, sb, nb) = common.mean_se(a[k]), common.mean_se(b[k])
    if na > 1 and nb > 1:
      out[k] = (ma - mb, float(np.hypot(sa, sb)), na, nb)
  return out


def _signed(d: float, s: float, field: str) -> str:
  """"+d ± s (z)": the gap, its combined standard error, and z = d / s."""
  _, scale, digits = _CURVES[field]
  z = f"{d / s:+.1f}" if s > 0 else "—"
  return f"{scale * d:+.{digits}f} ± {scale * s:.{digits}f} ({z})"


def _block(k: int) -> str:
  return f"{k * _BLOCK_EPOCHS + 1}-{(k + 1) * _BLOCK_EPOCHS}"


_GAP_FIELDS = ("test_accuracy", "train_loss", "val_loss")
_GAP_WHAT = ("guRNN − orthogonal RNN over blocks of 10 epochs: the difference of the two "
             "models' block means (each a mean over the runs that finished the block) ± the "
             "combined standard error √(s₁² + s₂²), and in parentheses the gap in units of "
             "that error")


def gap_table(rows: list) -> list[str]:
  """Where the guRNN and the orthogonal RNN part and meet: `block_gaps` of the test
  accuracy (%), training loss and validation loss, a line per block, with each model's
  number of runs. [] without both models or two runs of each in some block."""
  from lie_unitary.experiments import report as common
  gaps = {f: block_gaps(rows, f) for f in _GAP_FIELDS}
  blocks = sorted(set().union(*gaps.values()))
  if not blocks:
    return []
  cell = lambda f, k: _signed(*gaps[f][k][:2], f) if k in gaps[f] else "—"  # noqa: E731
  runs = lambda k: next(f"{g[k][2]}, {g[k][3]}" for g in gaps.values() if k in g)  # noqa: E731
  return [f"{_GAP_WHAT}:", ""] + common.table(
      ["epochs", "test accuracy (%)", "training loss", "validation loss", "runs"],
      [[_block(k)] + [cell(f, k) for f in _GAP_FIELDS] + [runs(k)] for k in blocks])


def sizes_lines(folders: list) -> list[str]:
  """The test accuracy gap of `gap_table` per folder side by side, for each image task
  and dataset that two or more of `folders` hold (a size each, say), and the last
  folder's gap minus the first's ± √(s_first² + s_last²): whether the gap changed."""
  from lie_unitary.experiments import report as common
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.rnn import report
  gaps = collections.defaultdict(dict)
  for folder in folders:
    records = workdir.load_results(folder, as_frame=False)
    if any("approach" in r or "angle_max" in r for r in records):
      continue
    for key, rows in report.table_rows(records, images=True).items():
      found = block_gaps(rows, "test_accuracy")
      if found:
        gaps[key][folder] = found
  out = []
  for (task, dataset), by_folder in sorted(gaps.items()):
    if len(by_folder) < 2:
      continue
    names = list(by_folder)
    first, last = by_folder[names[0]], by_folder[names[-1]]
    out += [f"### {task} {dataset}: the test accuracy gap (%) by folder", "",
            f"{_GAP_WHAT}; the last column: {names[-1]}'s gap minus {names[0]}'s, ± the "
            "two gaps' combined standard error:", ""]
    out += common.table(["epochs"] + names + [f"{names[-1]} − {names[0]}"], [
        [_block(k)] + [_signed(*g[k][:2], "test_accuracy") if k in g else "—"
                       for g in by_folder.values()]
        + [_signed(last[k][0] - first[k][0], float(np.hypot(last[k][1], first[k][1])),
                   "test_accuracy") if k in first and k in last else "—"]
        for k in sorted(set().union(*by_folder.values()))])
  return out


def rnn_lines(records, reference=()) -> list[str]:
  """Per image task and dataset: the block tables, then the test accuracy and drift at
  every validation point."""
  from lie_unitary.experiments.rnn import report
  out = []
  records = records + report.reference_records(reference, records)
  for (task, dataset), rows in report.table_rows(records, images=True).items():
    out += [f"### {task} {dataset}", ""]
    out += sum((curve_table(rows, f, _BLOCK_EPOCHS) for f in list(_CURVES)[:3]), [])
    out += gap_table(rows)
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
  return rnn_lines(records, report.read_reference(folder))


def main(folders) -> int:
  if not folders:
    print(__doc__, file=sys.stderr)
    return 2
  for folder in folders:
    if folder.startswith("-"):
      print(__doc__, file=sys.stderr)
      return 2
    try:
      text = lines(folder)
    except (FileNotFoundError, ValueError) as e:  # no workdir, no records
      print(f"{folder}: {e}", file=sys.stderr)
      return 2
    if not text:
      print(f"{folder}: no records of an RNN image task, operators or basis", file=sys.stderr)
      return 2
    print(f"## {folder}\n")
    print("\n".join(text))
  if len(folders) > 1 and (compared := sizes_lines(folders)):
    print("## The folders' gaps side by side\n")
    print("\n".join(compared))
  return 0


if __name__ == "__main__":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  sys.exit(main(sys.argv[1:]))
