"""Report of the operator-learning runs (paper §3): test-loss tables, seeds pooled, beside the
paper's Tables 1-2; appendix B; figures. More: scripts/detail_tables.py, spectrum_figure.py."""

import collections
import contextlib
import itertools
from typing import Any
from typing import Sequence

import numpy as np

from lie_unitary.experiments import report as common
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.operators.config import BASELINES
from lie_unitary.experiments.operators.config import BASIS_CHANGE_APPROACHES as _BASIS


def _paper(name: str, out=None, approaches=None) -> dict:
  """`out` with {n: {approach: (mean, s.e. or None for "~")}} of a published table added."""
  out = {} if out is None else out
  for r in common.published(name)[1]:
    if approaches is None or r["approach"] in approaches:
      out.setdefault(r["n"], {})[r["approach"]] = (r["mean"], r["se"])
  return out


# The paper's Table 2 (its "lie_unrestricted" is our lie_algebra), and the value of each
# cell of ours: Table 1's, Table 2's for lie_restricted (not in Table 1).
PAPER_TABLE2 = _paper("operators_table2")
_PAPER = _paper("operators_table2", _paper("operators_table1"), ("lie_restricted",))
# The columns' order.
ORDER = ("true", "lstsq", "procrustes", "projection", "projection_orthogonal", "arjovsky",
         "lie_restricted", "so_algebra", "lie_algebra", "lie_zero_init", "lie_haar_init",
         "lie_recentred", "lie_rebased", "lie_rebased_orthonormal", "rand")
# What makes a record distinct (of one written twice, the last counts).
IDENTITY = ("n", "approach", "replicate", "optimizer", "learning_rate", "num_epochs",
            "basis_scale", "lr_schedule")
_SHORT_RUN_PAIRS = 100_000  # fewer training pairs per replicate: "too short to learn"
# The fields of the task (not of an approach): results of other values are other tables.
_TASK_FIELDS = ("field", "generators", "num_replicates", "dtype", "num_train", "num_val",
                "num_test", "val_subsample", "noise_std", "lie_target_std")


def task_of(r: dict) -> tuple:
  """A record's task: ((field, value), ...) of the fields that are not an approach's."""
  return tuple((k, tuple(v) if isinstance(v := r.get(k), list) else v) for k in _TASK_FIELDS)


def differences(task: tuple, tasks) -> str:
  """" (k=v, ...)" of the fields in which `task` (`task_of`) differs from others of `tasks`."""
  differ = [(k, v) for k, v in task if len({dict(t)[k] for t in tasks}) > 1]
  return f" ({', '.join(f'{k}={v}' for k, v in differ)})" if differ else ""


def groups(results: list[dict]) -> dict:
  """Standard-basis "final" records by (task, optimizer, lr, schedule), every seed's
  pooled, the baselines in each group of their task; {} for a change-of-basis sweep."""
  if any(r.get("basis_scale") for r in results):
    return {}
  baselines = [r for r in results if r["optimizer"] == "none"]
  out = collections.defaultdict(list)
  for r in results:
    if r["optimizer"] != "none":
      out[(task_of(r), r["optimizer"], r["learning_rate"],
           r.get("lr_schedule") or "constant")].append(r)
  out = out or {(task, "none", 0.0, "constant"): [] for task in map(task_of, baselines)}
  return {k: v + [b for b in baselines if task_of(b) == k[0]] for k, v in out.items()}


def _losses(results, key=lambda r: (r["n"], r["approach"]), scale=lambda r: 1.0):
  """Test losses (each divided by scale(record)) grouped by key(record)."""
  out = collections.defaultdict(list)
  for r in results:
    out[key(r)].append(float(r["test_loss"]) / scale(r))
  return out


def _fmt(x: float) -> str:
  return "0" if x == 0 else f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}" if abs(
      x) >= 0.01 else f"{x:.3e}"


def _cell(values, paper=None) -> str:
  """`common.pm` of `values`, the paper's (mean ± s.e.) in parentheses."""
  if not values or paper is None:
    return common.pm(values, _fmt)
  return f"{common.pm(values, _fmt)} ({' ± '.join(_fmt(v) for v in paper if v is not None)})"


def _table(results, paper, approaches=ORDER, title="") -> list[str]:
  cols = [a for a in approaches if a in {r["approach"] for r in results}]
  if not cols:
    return []
  vals = _losses(results)
  trained = [r for r in results if r.get("optimizer") != "none" and r.get("num_epochs")]
  epochs = lambda n: sorted({r["num_epochs"] for r in trained if r["n"] == n})
  rows = [[str(n), ",".join(map(str, epochs(n))) or "—"]
          + [_cell(vals[(n, a)], paper.get(n, {}).get(a)) for a in cols]
          for n in sorted({r["n"] for r in results})]
  return [title, ""] + common.table(["n", "epochs"] + cols, rows)


def _basis_tables(results, figure=None) -> list[str]:
  """Appendix B: final test loss per (c, learning rate), one grid per approach; `figure`'s link."""
  basis = [r for r in results if r["approach"] in _BASIS and r["optimizer"] != "none"]
  scales = sorted({r["basis_scale"] for r in basis})
  if len(scales) < 2:
    return []
  lrs = sorted({r["learning_rate"] for r in basis}, reverse=True)
  vals = _losses(basis, lambda r: (r["approach"], r["basis_scale"], r["learning_rate"]))
  lines = []
  for a in [a for a in _BASIS if any(r["approach"] == a for r in basis)]:
    rows = [[f"{c:g}"] + [_cell(vals[(a, c, lr)]) for lr in lrs] for c in scales]
    lines += ([f"## Appendix B: change of basis, {a} (final test loss)", ""]
              + common.table(["c \\ lr"] + [f"{lr:.3g}" for lr in lrs], rows))
  by_approach = _losses(results, lambda r: r["approach"])
  lines += [f"\n{a}: {_cell(by_approach[a])}" for a in ("true", "rand") if by_approach[a]]
  return lines + [""] + ([f"![appendix B grid]({figure})", ""] if figure else [])


def _figure2(results):
  """Test loss / mean rand loss at the same n, per generator × approach, ± 1 s.e., log scale."""
  rand = {n: float(np.mean(v)) for n, v in _losses(
      [r for r in results if r["approach"] == "rand"], lambda r: r["n"]).items()}
  ratios = _losses([r for r in results if r["n"] in rand and r["approach"] != "rand"],
                   lambda r: (r["generator"], r["approach"]), lambda r: rand[r["n"]])
  gens = sorted({g for g, _ in ratios})
  approaches = [a for a in ORDER if a not in BASELINES and any(k[1] == a for k in ratios)]
  if not approaches:
    return None
  fig, ax = common.figure((8, 4.5))
  width = 0.8 / len(approaches)
  for j, a in enumerate(approaches):
    xs, ys, se = np.array([(i + (j - (len(approaches) - 1) / 2) * width, *common.mean_se(v)[:2])
                           for i, g in enumerate(gens) if (v := ratios.get((g, a)))]).T
    ax.errorbar(xs, ys, yerr=np.nan_to_num(se), fmt="o", capsize=3, label=a)
  if true := [v for (_, a), vs in ratios.items() if a == "true" for v in vs]:
    ax.axhline(np.mean(true), ls=":", color="k", label="true")
  ax.set(xticks=range(len(gens)), xticklabels=gens, xlabel="generator of U", yscale="log",
         ylabel="test loss / rand loss (mean ± s.e.)")
  ax.legend(fontsize=8)
  fig.tight_layout()
  return fig


def _basis_grid(curves):
  """Appendix B: validation curves, rows c, columns learning rate."""
  curves = sorted([c for c in curves if c.get("approach") in _BASIS],
                  key=lambda c: (c["replicate"], str(c.get("unit"))))
  scales = sorted({c["basis_scale"] for c in curves})
  if len(scales) < 2:
    return None
  lrs = sorted({c["learning_rate"] for c in curves}, reverse=True)
  fig, axes = common.figure((3 * len(lrs), 2.4 * len(scales)), len(scales), len(lrs),
                            sharex=True, squeeze=False)
  for c in curves:  # one color per approach
    ax = axes[scales.index(c["basis_scale"])][lrs.index(c["learning_rate"])]
    ax.plot(c["val_steps"], [float(v) for v in c["val_loss"]], lw=0.8,
            color=f"C{_BASIS.index(c['approach'])}",
            label=c["approach"] if c["replicate"] == 0 else None)
  for (i, s), (j, lr) in itertools.product(enumerate(scales), enumerate(lrs)):
    axes[i][j].set(yscale="log", title=f"lr = {lr:.3g}" if i == 0 else "",
                   ylabel=f"c = {s:g}\nvalidation loss" if j == 0 else "",
                   xlabel="step" if i == len(scales) - 1 else "")
  axes[0][0].legend(fontsize=7)
  fig.tight_layout()
  return fig


def figures(results: Any, curves: Any = ()) -> dict:
  """{name: matplotlib Figure (no pyplot)} of "figure2" and "basis_change" where drawable;
  `results`, `curves`: "final" and "curve" records (dicts or a DataFrame)."""
  results = common.latest(results, "final", IDENTITY)
  curves = common.latest(curves, "curve", IDENTITY)
  standard = results and not any(r.get("basis_scale") for r in results)
  figs = {"figure2": _figure2(results) if standard else None,
          "basis_change": _basis_grid(curves)}
  return {k: fig for k, fig in figs.items() if fig is not None}


def markdown(results: Any, *, figure_files: dict | None = None,
             source: str | None = None, launches: Sequence[dict] = ()) -> str:
  """The Markdown report of `results` (as `figures`'), linking `figure_files` ({name: file}),
  naming `source`, noting machines that differ among `launches` (`common.machines_note`)."""
  results = common.latest(results, "final", IDENTITY)
  figure_files = figure_files or {}
  seeds = sorted({r["seed"] for r in results if "seed" in r})
  lines = ["# Learning unitary operators: results", "",
           f"{len(results)} records" + (f" from `{source}`" if source else "")
           + f", seeds {', '.join(map(str, seeds)) or '—'}. Cells: test loss, {common.SE}; "
           "the paper's value in parentheses where it has one: its Table 1 for every "
           "column, its Table 2 for lie_restricted.", ""]
  lines += common.machines_note(launches, {r["unit"] for r in results if "unit" in r})
  pairs = [int(r["num_train"]) * int(r.get("num_epochs", 1)) for r in results
           if r.get("optimizer") != "none" and "num_train" in r]
  if pairs and max(pairs) < _SHORT_RUN_PAIRS:
    lines += [f"**A short run ({max(pairs):,} training pairs per replicate at most; the paper: "
              "10⁶): a check that everything runs, too short to learn: no results.**", ""]
  paper = {} if any(r.get("field") == "real" for r in results) else _PAPER  # SO(n): none
  by_group = groups(results)
  tasks = sorted({k[0] for k in by_group}, key=repr)
  for (task, opt, lr, sched), group in sorted(by_group.items(), key=repr):
    title = "## Baselines" if opt == "none" else (
        f"## Test loss ({opt}, lr {lr:g}" + ("" if sched == "constant" else
                                            f", {sched} schedule") + ")")
    title += differences(task, tasks).replace(" (", " — ", 1).rstrip(")")
    lines += _table(group, paper, title=title)
    if any(r["approach"] == "lie_restricted" for r in group):
      lines += _table([r for r in group if r["n"] in PAPER_TABLE2], PAPER_TABLE2,
                      ("arjovsky", "lie_restricted", "lie_algebra"),
                      title=f"### Table 2 ({opt}) beside the paper's Table 2")
  lines += _basis_tables(results, figure_files.get("basis_change"))
  if "figure2" in figure_files:
    lines += ["## Figure 2", "", f"![figure 2]({figure_files['figure2']})", ""]
  return "\n".join(lines) + "\n"


def write_report(workdir: str, results: Any = None, curves: Any = None) -> list[str]:
  """`common.write_report` of `markdown` and `figures` from `results` and `curves` (default:
  the workdir's); the paths written."""
  if curves is None:
    curves = []
    with contextlib.suppress(FileNotFoundError, ValueError):  # none: no basis figure
      curves = workdir_lib.load_results(workdir, workdir_lib.CURVES, as_frame=False)
  return common.write_report(workdir, results, lambda r: figures(r, curves), markdown, 120,
                             source=workdir_lib.path(workdir, workdir_lib.RESULTS))
