"""Report of the operator-learning runs: tables beside the paper's, Figure 2, appendix B.

`write_report(workdir)` reads WORKDIR/results.jsonl (and curves.jsonl) and writes
WORKDIR/report.md with

- a results table per (optimizer, epochs-per-n) group: mean ± bootstrap s.e. over
  replicates for every n and approach, the paper's Table 1 value beside each cell
  where it has one (our ``lie_restricted`` column is shown beside Table 2's);
- Table 2 (arjovsky, lie_restricted, lie_algebra) beside the paper's when
  lie_restricted was run;
- ``figure2.png``: test loss / rand loss per generator × approach (pooled over n, each
  loss divided by the mean rand loss at its n) with bootstrap 95% CIs, the scaled
  true loss dotted; right panel lie_algebra and lie_restricted on a log scale;
- ``basis_change.png``: the appendix-B grid of validation curves (rows c, columns
  learning rate) when a basis-change run is present.
"""

from __future__ import annotations

import collections
import os
from typing import Sequence

import numpy as np

from lie_unitary.experiments import records as records_lib

__all__ = ["PAPER_TABLE1", "PAPER_TABLE2", "bootstrap_ci", "bootstrap_mean_se",
           "load_results", "write_report"]

# Paper Table 1: (mean, s.e.) of the test loss; s.e. None where the paper gives "~".
PAPER_TABLE1 = {
    3: dict(true=(6.004e-4, 0.005e-4), projection=(8, 1), arjovsky=(6.005e-4, 0.003e-4),
            lie_algebra=(6.003e-4, 0.003e-4), rand=(12.5, 0.4)),
    6: dict(true=(0.001, None), projection=(15, 1), arjovsky=(0.09, 0.01),
            lie_algebra=(0.03, 0.01), rand=(24, 1)),
    8: dict(true=(0.002, None), projection=(14, 1), arjovsky=(1.17, 0.06),
            lie_algebra=(0.014, 0.006), rand=(31.6, 0.6)),
    14: dict(true=(0.003, None), projection=(24, 4), arjovsky=(10.8, 0.3),
             lie_algebra=(0.07, 0.02), rand=(52, 1)),
    20: dict(true=(0.004, None), projection=(38, 3), arjovsky=(29.0, 0.5),
             lie_algebra=(0.47, 0.03), rand=(81, 2)),
}
# Paper Table 2 (its "lie_unrestricted" is our lie_algebra).
PAPER_TABLE2 = {
    8: dict(arjovsky=(1.2, 0.1), lie_restricted=(1.0, 0.2), lie_algebra=(0.04, 0.01)),
    14: dict(arjovsky=(11.6, 0.3), lie_restricted=(12.6, 0.4), lie_algebra=(0.25, 0.03)),
    20: dict(arjovsky=(27.8, 0.7), lie_restricted=(28.0, 0.6), lie_algebra=(0.19, 0.03)),
}
_ORDER = ("true", "lstsq", "projection", "projection_orthogonal", "arjovsky",
          "lie_restricted", "so_algebra", "lie_algebra", "rand")
_KEY = ("n", "approach", "replicate", "optimizer", "learning_rate", "num_epochs",
        "basis_scale")


def bootstrap_mean_se(values: Sequence[float], num: int = 2000, seed: int = 0):
  """(mean, bootstrap standard error of the mean) of `values`."""
  values = np.asarray(values, np.float64)
  rng = np.random.default_rng(seed)
  means = values[rng.integers(0, len(values), (num, len(values)))].mean(axis=1)
  return float(values.mean()), float(means.std(ddof=1)) if len(values) > 1 else 0.0


def bootstrap_ci(values: Sequence[float], level: float = 0.95, num: int = 2000, seed: int = 0):
  """(low, high): the percentile bootstrap confidence interval of the mean."""
  values = np.asarray(values, np.float64)
  rng = np.random.default_rng(seed)
  means = values[rng.integers(0, len(values), (num, len(values)))].mean(axis=1)
  alpha = (1 - level) / 2
  return float(np.quantile(means, alpha)), float(np.quantile(means, 1 - alpha))


def load_results(workdir: str) -> list[dict]:
  """The result records, one per key (a record written twice counts once: the last)."""
  by_key = {}
  for r in records_lib.read_records(os.path.join(workdir, "results.jsonl")):
    by_key[tuple(r.get(k) for k in _KEY)] = r
  return list(by_key.values())


def _fmt(x: float) -> str:
  if x == 0:
    return "0"
  if abs(x) >= 100:
    return f"{x:.0f}"
  if abs(x) >= 0.01:
    return f"{x:.3g}"
  return f"{x:.3e}"


def _cell(values, paper=None) -> str:
  if not values:
    return "—"
  mean, se = bootstrap_mean_se(values)
  out = f"{_fmt(mean)} ± {_fmt(se)}"
  if paper is not None:
    pm, ps = paper
    out += f" ({_fmt(pm)}" + (f" ± {_fmt(ps)})" if ps is not None else ")")
  return out


def _groups(results):
  """Standard-basis results grouped by the trained settings' optimizer (baselines shared).

  A change-of-basis sweep (some basis_scale > 0) gets its own grid instead.
  """
  if any(r.get("basis_scale") for r in results):
    return {}
  trained = [r for r in results if r["optimizer"] != "none"]
  baselines = [r for r in results if r["optimizer"] == "none"]
  groups = collections.defaultdict(list)
  for r in trained:
    groups[(r["optimizer"], r["learning_rate"])].append(r)
  if not groups and baselines:
    groups[("none", 0.0)] = []
  return {k: v + baselines for k, v in groups.items()}


def _table(results, paper, approaches=None, title="") -> list[str]:
  ns = sorted({r["n"] for r in results})
  present = {r["approach"] for r in results}
  cols = [a for a in (approaches or _ORDER) if a in present]
  if not ns or not cols:
    return []
  vals = collections.defaultdict(list)
  epochs = collections.defaultdict(set)
  for r in results:
    vals[(r["n"], r["approach"])].append(float(r["test_loss"]))
    if r["num_epochs"]:
      epochs[r["n"]].add(r["num_epochs"])
  lines = [title, "", "| n | epochs | " + " | ".join(cols) + " |",
           "|---|---|" + "---|" * len(cols)]
  for n in ns:
    cells = [_cell(vals[(n, a)], paper.get(n, {}).get(a)) for a in cols]
    ep = ",".join(str(e) for e in sorted(epochs[n])) or "—"
    lines.append(f"| {n} | {ep} | " + " | ".join(cells) + " |")
  return lines + [""]


def _figure2(results, path) -> bool:
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

  rand = collections.defaultdict(list)
  for r in results:
    if r["approach"] == "rand":
      rand[r["n"]].append(float(r["test_loss"]))
  if not rand:
    return False
  rand_mean = {n: float(np.mean(v)) for n, v in rand.items()}
  ratios = collections.defaultdict(list)
  for r in results:
    if r["n"] in rand_mean and r["approach"] not in ("rand",):
      ratios[(r["generator"], r["approach"])].append(float(r["test_loss"]) / rand_mean[r["n"]])
  gens = sorted({g for g, _ in ratios})
  approaches = [a for a in _ORDER if a not in ("true", "rand", "lstsq")
                and any(a == b for _, b in ratios)]
  if not approaches:
    return False
  true_line = np.mean([v for (g, a), vs in ratios.items() if a == "true" for v in vs])
  fig, axes = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw=dict(width_ratios=(3, 2)))

  def panel(ax, names, log):
    width = 0.8 / max(len(names), 1)
    for j, a in enumerate(names):
      xs, ys, lo, hi = [], [], [], []
      for i, g in enumerate(gens):
        v = ratios.get((g, a))
        if not v:
          continue
        low, high = bootstrap_ci(v)
        xs.append(i + (j - (len(names) - 1) / 2) * width)
        ys.append(np.mean(v))
        lo.append(np.mean(v) - low)
        hi.append(high - np.mean(v))
      ax.errorbar(xs, ys, yerr=[lo, hi], fmt="o", capsize=3, label=a)
    ax.axhline(true_line, ls=":", color="k", label="true")
    ax.set_xticks(range(len(gens)), gens)
    ax.set_xlabel("generator of U")
    if log:
      ax.set_yscale("log")
    ax.legend(fontsize=8)

  panel(axes[0], approaches, log=False)
  axes[0].set_ylabel("test loss / rand loss (95% bootstrap CI)")
  axes[0].set_title("all approaches")
  zoom = [a for a in ("lie_algebra", "lie_restricted", "so_algebra") if a in approaches]
  panel(axes[1], zoom or approaches, log=True)
  axes[1].set_title("lie_algebra (log scale) beside lie_restricted")
  fig.tight_layout()
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return True


def _basis_grid(workdir, path) -> bool:
  curves = records_lib.read_records(os.path.join(workdir, "curves.jsonl"))
  curves = [c for c in curves if c.get("approach") == "lie_algebra"]
  scales = sorted({c["basis_scale"] for c in curves})
  if len(scales) < 2:
    return False
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

  lrs = sorted({c["learning_rate"] for c in curves}, reverse=True)
  fig, axes = plt.subplots(len(scales), len(lrs), figsize=(3 * len(lrs), 2.4 * len(scales)),
                           sharex=True, squeeze=False)
  latest = {}
  for c in curves:
    latest[(c["basis_scale"], c["learning_rate"], c["replicate"])] = c
  for i, s in enumerate(scales):
    for j, lr in enumerate(lrs):
      ax = axes[i][j]
      for (cs, clr, _), c in sorted(latest.items()):
        if cs == s and clr == lr:
          ax.plot(c["val_steps"], c["val_loss"], lw=0.8)
      ax.set_yscale("log")
      if i == 0:
        ax.set_title(f"lr = {lr:.3g}", fontsize=9)
      if j == 0:
        ax.set_ylabel(f"c = {s:g}\nvalidation loss", fontsize=9)
      if i == len(scales) - 1:
        ax.set_xlabel("step")
  fig.tight_layout()
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return True


def _orthogonal_components(results) -> list[str]:
  """Which projection-onto-O(n) runs ended in the det = -1 component.

  O(n) has two components and a gradient step followed by the polar projection never
  leaves the one it starts in. From a Haar O(n) draw with det = -1 the best it can
  reach for an SO(n) target U is U with one direction reflected: test loss
  ‖W - U‖²_F = 2² = 4 plus the noise floor. A final loss above 2 is counted as that.
  """
  runs = [r for r in results if r["approach"] == "projection_orthogonal"]
  if not runs:
    return []
  lines = ["Real SO(n) targets (the paper has none). projection_orthogonal cannot leave "
           "the component of O(n) it starts in: from det = −1 the best it reaches is the "
           "target with one direction reflected, test loss 4 + noise. Replicates that "
           "ended there (test loss > 2):", ""]
  for n in sorted({r["n"] for r in runs}):
    mine = [r for r in runs if r["n"] == n]
    stuck = [r for r in mine if float(r["test_loss"]) > 2]
    mean = np.mean([float(r["test_loss"]) for r in stuck]) if stuck else float("nan")
    lines.append(f"- n = {n}: {len(stuck)} of {len(mine)}"
                 + (f" (their mean test loss {mean:.3f})" if stuck else ""))
  return lines + [""]


def write_report(workdir: str) -> list[str]:
  """Renders WORKDIR/report.md and the PNG figures; returns the paths written."""
  results = load_results(workdir)
  written = []
  lines = ["# Learning unitary operators: results", "",
           f"{len(results)} records from `{os.path.join(workdir, 'results.jsonl')}`. Cells: "
           "test loss, mean ± bootstrap s.e. over replicates (paper's value in parentheses "
           "where it has one; its Table 1 for every column, its Table 2 for lie_restricted).",
           ""]
  paper = {n: dict(row) for n, row in PAPER_TABLE1.items()}
  for n, row in PAPER_TABLE2.items():
    paper.setdefault(n, {})["lie_restricted"] = row["lie_restricted"]
  real = [r for r in results if r.get("field") == "real"]
  if real:  # SO(n) targets: the paper has no numbers for them
    paper = {}
    lines += _orthogonal_components(real)
  for (opt, lr), group in sorted(_groups(results).items()):
    title = f"## Test loss ({opt}, lr {lr:g})" if opt != "none" else "## Baselines"
    lines += _table(group, paper, title=title)
    if any(r["approach"] == "lie_restricted" for r in group):
      lines += _table([r for r in group if r["n"] in PAPER_TABLE2], PAPER_TABLE2,
                      ("arjovsky", "lie_restricted", "lie_algebra"),
                      title=f"### Table 2 ({opt}) beside the paper's Table 2")
  basis = [r for r in results if r["approach"] == "lie_algebra" and r["optimizer"] != "none"]
  if len({r["basis_scale"] for r in basis}) > 1:
    lines += ["## Appendix B: change of basis (final test loss)", "",
              "| c \\ lr | " + " | ".join(f"{lr:.3g}" for lr in
                                         sorted({r["learning_rate"] for r in basis},
                                                reverse=True)) + " |"]
    lrs = sorted({r["learning_rate"] for r in basis}, reverse=True)
    lines.append("|---|" + "---|" * len(lrs))
    for c in sorted({r["basis_scale"] for r in basis}):
      cells = [_cell([float(r["test_loss"]) for r in basis
                      if r["basis_scale"] == c and r["learning_rate"] == lr]) for lr in lrs]
      lines.append(f"| {c:g} | " + " | ".join(cells) + " |")
    for a in ("true", "rand"):
      vals = [float(r["test_loss"]) for r in results if r["approach"] == a]
      if vals:
        lines.append(f"\n{a}: {_cell(vals)}")
    lines.append("")
    grid = os.path.join(workdir, "basis_change.png")
    if _basis_grid(workdir, grid):
      written.append(grid)
      lines += ["![appendix B grid](basis_change.png)", ""]
  fig = os.path.join(workdir, "figure2.png")
  basis_sweep = any(r.get("basis_scale") for r in results)
  if not basis_sweep and _figure2(results, fig):
    written.append(fig)
    lines += ["## Figure 2", "", "![figure 2](figure2.png)", ""]
  path = os.path.join(workdir, "report.md")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines) + "\n")
  return [path] + written
