"""``python -m lie_unitary.experiments.operators --config=NAME --workdir=DIR``.

Learns unitary operators y = Ux + ε (paper §3) for every unit of the config and
writes WORKDIR/report.md. NAME: a file of configs/ (or any config file's path); the
fields: `lie_unitary.experiments.operators.config`; flags:
`lie_unitary.experiments.launch`.
"""

from lie_unitary.experiments import launch

if __name__ == "__main__":
  launch.main("operators")
