"""``python -m lie_unitary.experiments.operators --config=NAME --workdir=DIR``: learns
y = Ux + ε (paper §3) for every unit of the config, then writes WORKDIR/report.md
(NAME: a file of configs/ or a path; flags: `lie_unitary.experiments.launch`)."""

from lie_unitary.experiments import launch

if __name__ == "__main__":
  launch.main("operators")
