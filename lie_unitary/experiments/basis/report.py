"""Report of the hidden-subalgebra runs: the targets, a table per group of cells that
differ in one field alone, figures (no pyplot). Angles: the principal angles (radians)
between span(M) and span(G*). Where the learned basis failed: `scripts/detail_tables.py`.
"""

import collections
from typing import Any
from typing import Sequence

import numpy as np

from lie_unitary.experiments import report as common
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.basis.config import APPROACHES as _ORDER
from lie_unitary.experiments.basis.config import CELL_FIELDS

# The cell of the stated targets: learned within 2× of oracle, ≥ 10× below full.
TARGET_CELL = dict(n=6, k=3, m=16, pairs=2, subalgebra="general", coef_std=1.0)
RECOVERED = 0.1  # radians: a learned basis recovered span(G*) when its largest angle is less


def _cell(r) -> tuple:
  return tuple(r[f] for f in CELL_FIELDS)


def _pm(values) -> str:
  return common.pm(values, lambda x: f"{x:.3g}" if np.isfinite(x) else "—")


def _by(results, key) -> dict:
  out = collections.defaultdict(list)
  for r in results:
    out[key(r)].append(r)
  return out


def _of(recs, approach, key="test_loss") -> list:
  return [r[key] for r in recs if r["approach"] == approach]


def _groups(results) -> list[tuple[str, dict, list]]:
  """(swept field, the fixed fields, its cells sorted) of every group of ≥ 2 cells that
  differ in that field alone."""
  cells, out = sorted({_cell(r) for r in results}), []
  for i, field in enumerate(CELL_FIELDS):
    for fixed, members in sorted(_by(cells, lambda c, i=i: c[:i] + c[i + 1:]).items()):
      if len(members) > 1:
        out.append((field, dict(zip([f for f in CELL_FIELDS if f != field], fixed)),
                    sorted(members, key=lambda c, i=i: c[i])))
  return out


def _words(fixed: dict) -> str:
  return ", ".join(f"{k} = {v}" for k, v in fixed.items())


def _tables(field, cells, by_cell) -> list[str]:
  """The test-loss table of a sweep, then its angle table if it has learned runs."""
  i = CELL_FIELDS.index(field)
  approaches = [a for a in _ORDER if any(_of(by_cell[c], a) for c in cells)]
  lines = common.table([field, "runs", "noise floor"] + approaches, [
      [c[i], max(len(v) for v in _by(by_cell[c], lambda r: r["approach"]).values()),
       f"{by_cell[c][0]['noise_floor']:.3g}"] + [_pm(_of(by_cell[c], a)) for a in approaches]
      for c in cells])
  rows = [[c[i], len(learned), _pm([r["angle_max"] for r in learned]),
           _pm([r["angle_mean"] for r in learned]),
           f"{sum(r['angle_max'] < RECOVERED for r in learned)} of {len(learned)}",
           _pm(_of(by_cell[c], "random_fixed", "angle_max"))]
          for c in cells if (learned := [r for r in by_cell[c] if r["approach"] == "learned"])]
  if rows:
    lines += [f"Principal angles (radians) between span(M) and span(G*) against {field}:", ""]
    lines += common.table([field, "runs", "learned: max angle", "learned: mean angle",
                           f"recovered (max < {RECOVERED})", "random_fixed: max angle"], rows)
  return lines


def _targets(by_cell) -> list[str]:
  """The stated targets at `TARGET_CELL`, and the angles at the largest m beside it."""
  c = tuple(TARGET_CELL[f] for f in CELL_FIELDS)
  if c not in by_cell:
    return []
  mean = {a: np.mean(_of(by_cell[c], a)) for a in {r["approach"] for r in by_cell[c]}}
  lines = [f"## Targets ({_words(TARGET_CELL)})", ""]
  if {"learned", "oracle", "full"} <= set(mean):
    lo, fl = mean["learned"] / mean["oracle"], mean["full"] / mean["learned"]
    medians = np.median(_of(by_cell[c], "learned")) / np.median(_of(by_cell[c], "oracle"))
    lines += [f"- learned / oracle test loss (means): {lo:.3g} (target ≤ 2: "
              f"{'met' if lo <= 2 else 'not met'}); of the medians: {medians:.3g}.",
              f"- full / learned test loss (means): {fl:.3g} (target ≥ 10: "
              f"{'met' if fl >= 10 else 'not met'})."]
  by_m = {cm[2]: rs for cm, rs in by_cell.items() if cm[:2] == c[:2] and cm[3:] == c[3:]
          and _of(rs, "learned")}
  if len(by_m) > 1:
    top = max(by_m)
    worst = _of(by_m[top], "learned", "angle_max")
    lines += [f"- principal angles falling below {RECOVERED} rad as m grows: at m = {top} the "
              f"learned basis' largest angle averages {np.mean(worst):.3g} rad; "
              f"{sum(w < RECOVERED for w in worst)} of {len(worst)} replicates below "
              f"{RECOVERED} (target: all; {'met' if max(worst) < RECOVERED else 'not met'})."]
  return lines + [""]


def markdown(results: Any, figure_files: dict | None = None, source: str | None = None,
             launches: Sequence[dict] = ()) -> str:
  """The report: targets, a test-loss and an angle table per sweep.

  Args:
    results: the "final" records (dicts or a DataFrame; of one written twice, the last).
    figure_files: {figure name: file name} of figures beside the report, linked.
    source: where the records came from, named in the header.
    launches: the workdir's launches, for `common.machines_note`.
  """
  results = common.latest(results, "final")
  by_cell = _by(results, _cell)
  lines = ["# Recovering a hidden subalgebra: results", "",
           f"{len(results)} records" + (f" from `{source}`" if source else "") + ". Cells: "
           f"test loss (per replicate the mean over its operators), {common.SE}. The "
           "noise floor is 2nσ², the loss of the true operators. Each trained replicate keeps "
           "the (start, learning rate) of least validation loss; the test pairs choose "
           "nothing.", ""]
  lines += common.machines_note(launches, {r["unit"] for r in results}) + _targets(by_cell)
  if figure_files:
    lines += ["## Figures", ""] + [f"![{k}]({v})" for k, v in figure_files.items()] + [""]
  for field, fixed, cells in _groups(results):
    lines += [f"## Test loss against {field} ({_words(fixed)})", ""]
    lines += _tables(field, cells, by_cell)
  return "\n".join(lines).rstrip() + "\n"


def _figure(results, field, cells, curves, hline, **axes):
  """`curves` [(label, approach, key)] against `field` over `cells` (mean ± s.e.), a
  dotted line at `hline` (value, label)."""
  i = CELL_FIELDS.index(field)
  fig, ax = common.figure((5.5, 4))
  for label, approach, key in curves:
    pts = np.array([(c[i], *common.mean_se(v)[:2]) for c in cells if (v := _of(
        [r for r in results if _cell(r) == c], approach, key))])
    if len(pts):
      ax.errorbar(pts[:, 0], pts[:, 1], yerr=pts[:, 2], marker="o", capsize=3, label=label)
  ax.axhline(hline[0], ls=":", color="k", label=hline[1])
  ax.set(xscale="log", xticks=[c[i] for c in cells], **axes)
  ax.set_xticklabels([c[i] for c in cells])
  ax.set_title(", ".join(f"{f} = {v}" for f, v in zip(CELL_FIELDS, cells[0]) if f != field),
               fontsize=8)
  ax.legend(fontsize=8)
  fig.tight_layout()
  return fig


def figures(results: Any) -> dict:
  """{"loss_vs_pairs", "angles_vs_m"}: Figures of the largest groups sweeping those
  fields, those that can be drawn."""
  results = common.latest(results, "final")
  biggest = {f: max((g for g in _groups(results) if g[0] == f), key=lambda g: len(g[2]),
                    default=None) for f in ("pairs", "m")}
  figs = {}
  if biggest["pairs"]:
    cells = biggest["pairs"][2]
    floor = next(r["noise_floor"] for r in results if _cell(r) == cells[0])
    figs["loss_vs_pairs"] = _figure(
        results, "pairs", cells, [(a, a, "test_loss") for a in _ORDER],
        (floor, "noise floor 2nσ²"), yscale="log", xlabel="training pairs per operator",
        ylabel="test loss (mean ± s.e.)")
  if biggest["m"] and _of(results, "learned"):
    figs["angles_vs_m"] = _figure(
        results, "m", biggest["m"][2],
        [("learned: max", "learned", "angle_max"), ("learned: mean", "learned", "angle_mean"),
         ("random_fixed: max", "random_fixed", "angle_max")],
        (RECOVERED, f"{RECOVERED} rad"), xlabel="operators m",
        ylabel="principal angle (rad, mean ± s.e.)")
  return figs


def write_report(workdir: str, results: Any = None) -> list[str]:
  """Writes WORKDIR/report.md and the `figures` as PNGs (`common.write_report`) from
  `results` (default: the workdir's records); raises as `common.write_report`."""
  return common.write_report(workdir, results, figures, markdown, 110,
                             source=workdir_lib.path(workdir, workdir_lib.RESULTS))
