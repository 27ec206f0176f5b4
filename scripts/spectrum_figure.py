r"""The λ chart's spectrum during training, from an operators workdir's curves: per n, the
median over replicates of the validation loss, the spread of θ = eigvalsh(iL(λ)) and the
smallest |sinc(Δ/2)| over eigenvalue gaps (`lie_unitary.principal_branch`); dashed: a
decaying schedule. Writes WORKDIR/spectrum.png.

  python scripts/spectrum_figure.py runs/table1
"""

import os
import sys

import numpy as np


def spectrum_figure(curves):
  """Validation loss and the λ chart's spectrum (median over replicates) per n."""
  curves = [c for c in curves if "theta_spread" in c and not c.get("basis_scale")]
  if not curves:
    return None
  from matplotlib.figure import Figure

  from lie_unitary.experiments.operators import report
  ns = sorted({c["n"] for c in curves})
  rows = (("val_loss", "validation loss", True), ("theta_spread", "spread of θ", False),
          ("min_sinc", "min |sinc(Δ/2)|", True))
  fig = Figure(figsize=(3.6 * len(ns), 7.5))
  axes = fig.subplots(len(rows), len(ns), sharex="col", squeeze=False)
  schedule = lambda c: c.get("lr_schedule") or "constant"
  keys = sorted({(c["approach"], schedule(c), report.task_of(c)) for c in curves},
                key=lambda k: (report.ORDER.index(k[0]) if k[0] in report.ORDER else 99,
                               k[1], repr(k[2])))
  colors = {k: f"C{i}" for i, k in enumerate(dict.fromkeys((a, t) for a, _, t in keys))}
  for j, n in enumerate(ns):
    for a, sched, task in keys:
      mine = [c for c in curves if c["n"] == n and c["approach"] == a
              and schedule(c) == sched and report.task_of(c) == task]
      if not mine:
        continue
      for i, (field, label, log) in enumerate(rows):
        vals = np.asarray([[np.nan if v is None else float(v) for v in c[field]]
                           for c in mine], np.float64)
        axes[i][j].plot(np.asarray(mine[0]["val_steps"], np.float64),
                        np.nanmedian(vals, axis=0), color=colors[(a, task)],
                        ls="-" if sched == "constant" else "--", lw=1,
                        label=a + ("" if sched == "constant" else f" ({sched})")
                        + report.differences(task, {k[2] for k in keys}))
        if log:
          axes[i][j].set_yscale("log")
        if j == 0:
          axes[i][j].set_ylabel(label)
    axes[0][j].set_title(f"n = {n}")
    axes[-1][j].set_xlabel("step")
  axes[0][0].legend(fontsize=7)
  fig.tight_layout()
  return fig


def main(argv) -> int:
  from lie_unitary.experiments import report as common
  from lie_unitary.experiments import workdir
  from lie_unitary.experiments.operators import report
  if len(argv) != 1:
    print(__doc__, file=sys.stderr)
    return 2
  curves = common.latest(workdir.load_results(argv[0], workdir.CURVES, as_frame=False),
                         "curve", report.IDENTITY)
  fig = spectrum_figure(curves)
  if fig is None:
    print(f"{argv[0]}: no λ approach recorded its spectrum", file=sys.stderr)
    return 1
  fig.savefig(os.path.join(argv[0], "spectrum.png"), dpi=110)
  print(f"wrote {os.path.join(argv[0], 'spectrum.png')}")
  return 0


if __name__ == "__main__":
  sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  sys.exit(main(sys.argv[1:]))
