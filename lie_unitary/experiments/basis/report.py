"""Report of the hidden-subalgebra runs: targets, figures, a table per group of cells that
differ in one field alone. Where the learned basis failed: `scripts/detail_tables.py`."""

import collections

import numpy as np

from lie_unitary.experiments import report as common
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.basis.config import APPROACHES
from lie_unitary.experiments.basis.config import CELL_FIELDS

TARGET_CELL = dict(n=6, k=3, m=16, pairs=2, subalgebra="general", coef_std=1.0)  # the targets' cell
RECOVERED = 0.1  # radians: a learned basis recovered span(G*) when its largest angle is less
_ANGLES = (("learned", "angle_max"), ("learned", "angle_mean"), ("random_fixed", "angle_max"))
_FIGURES = {  # name: (the field swept, curves (label, approach, record key), its axes)
    "loss_vs_pairs": ("pairs", [(a, a, "test_loss") for a in APPROACHES], dict(
        yscale="log", xlabel="training pairs per operator", ylabel="test loss (mean ± s.e.)")),
    "angles_vs_m": ("m", [(f"{a}: {k[6:]}", a, k) for a, k in _ANGLES], dict(
        xlabel="operators m", ylabel="principal angle (rad, mean ± s.e.)")),
}
_of = lambda recs, approach, key="test_loss": [r[key] for r in recs if r["approach"] == approach]
_words = lambda fixed: ", ".join(f"{k} = {v}" for k, v in fixed.items())  # a cell's fields


def _by_cell(results) -> dict:
  out = collections.defaultdict(list)
  for r in results:
    out[tuple(r[f] for f in CELL_FIELDS)].append(r)
  return out


def _groups(by_cell) -> list[tuple[str, dict, list]]:
  """(field, the others' values, its cells sorted) of each ≥ 2 cells differing in it alone."""
  out = []
  for i, field in enumerate(CELL_FIELDS):
    groups = collections.defaultdict(list)
    for c in sorted(by_cell):
      groups[c[:i] + c[i + 1:]].append(c)
    out += [(field, dict(zip(CELL_FIELDS[:i] + CELL_FIELDS[i + 1:], fixed)), cells)
            for fixed, cells in sorted(groups.items()) if len(cells) > 1]
  return out


def _table(field, cells, by_cell) -> list[str]:
  """A group's table: test losses, principal angles, how many learned bases recovered G*."""
  i = CELL_FIELDS.index(field)
  cols = [c for c in [(a, "test_loss") for a in APPROACHES] + list(_ANGLES)
          if any(_of(by_cell[x], *c) for x in cells)]
  pm = lambda values: common.pm(values, lambda x: f"{x:.3g}" if np.isfinite(x) else "—")
  rows = []
  for c in cells:
    runs = max(collections.Counter(r["approach"] for r in by_cell[c]).values())
    worst = _of(by_cell[c], "learned", "angle_max")
    rows.append([c[i], runs, f"{by_cell[c][0]['noise_floor']:.3g}"]
                + [pm(_of(by_cell[c], *col)) for col in cols]
                + [f"{sum(w < RECOVERED for w in worst)} of {len(worst)}" if worst else "—"])
  header = [a if k == "test_loss" else f"{a}: {k[6:]} angle" for a, k in cols]
  return common.table([field, "runs", "noise floor", *header, f"recovered (max < {RECOVERED})"],
                      rows)


def markdown(results, figure_files: dict | None = None, source: str = "", launches=()) -> str:
  """The report of the "final" records (dicts or a DataFrame), linking `figure_files` {name:
  file}; `source`: the records' file; `launches`: for `common.machines_note`."""
  results = common.latest(results, "final")
  by_cell = _by_cell(results)
  lines = ["# Recovering a hidden subalgebra: results", "",
           f"{len(results)} records" + (f" from `{source}`" if source else "") + ". Cells: test "
           "loss (per replicate the mean over its operators; the noise floor 2nσ² is the true "
           "operators' loss) and principal angles (radians) between span(M) and span(G*), "
           f"{common.SE}. Each trained replicate keeps the (start, learning rate) of least "
           "validation loss; the test pairs choose nothing.", ""]
  lines += common.machines_note(launches, {r["unit"] for r in results})
  loss = {a: _of(by_cell.get(tuple(TARGET_CELL.values()), []), a)
          for a in ("learned", "oracle", "full")}
  if all(loss.values()):  # the stated targets' test-loss ratios
    ratios = lambda f: [f"{f(loss['learned']) / f(loss['oracle']):.3g}",
                        f"{f(loss['full']) / f(loss['learned']):.3g}"]
    lines += [f"## Targets ({_words(TARGET_CELL)}; at the largest m, all recover G*)", ""]
    lines += common.table(["test loss", "learned / oracle (≤ 2)", "full / learned (≥ 10)"],
                          [["means", *ratios(np.mean)], ["medians", *ratios(np.median)]])
  if figure_files:
    lines += ["## Figures", ""] + [f"![{k}]({v})" for k, v in figure_files.items()] + [""]
  for field, fixed, cells in _groups(by_cell):
    lines += [f"## Against {field} ({_words(fixed)})", ""] + _table(field, cells, by_cell)
  return "\n".join(lines).rstrip() + "\n"


def figures(results) -> dict:
  """{name: Figure} of the `_FIGURES` that can be drawn, of the largest group sweeping each."""
  results = common.latest(results, "final")
  by_cell, figs = _by_cell(results), {}
  for name, (field, curves, axes) in _FIGURES.items():
    groups = [g for g in _groups(by_cell) if g[0] == field]
    if not groups or (field == "m" and not _of(results, "learned")):
      continue
    _, fixed, cells = max(groups, key=lambda g: len(g[2]))
    i = CELL_FIELDS.index(field)
    fig, ax = common.figure((5.5, 4))
    for label, approach, key in curves:
      pts = np.array([(c[i], *common.mean_se(v)[:2]) for c in cells
                      if (v := _of(by_cell[c], approach, key))])
      if len(pts):
        ax.errorbar(pts[:, 0], pts[:, 1], yerr=pts[:, 2], marker="o", capsize=3, label=label)
    y, label = ((by_cell[cells[0]][0]["noise_floor"], "noise floor 2nσ²") if field == "pairs"
                else (RECOVERED, f"{RECOVERED} rad"))
    ax.axhline(y, ls=":", color="k", label=label)
    ax.set(xscale="log", xticks=[c[i] for c in cells], xticklabels=[c[i] for c in cells], **axes)
    ax.set_title(_words(fixed), fontsize=8)
    ax.legend(fontsize=8)
    fig.tight_layout()
    figs[name] = fig
  return figs


def write_report(workdir: str, results=None) -> list[str]:
  """`common.write_report` of `results` (default: the workdir's records); the paths written."""
  return common.write_report(workdir, results, figures, markdown, 110,
                             source=workdir_lib.path(workdir, workdir_lib.RESULTS))
