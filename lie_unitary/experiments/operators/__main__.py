"""``python -m lie_unitary.experiments.operators --config=VARIANT --workdir=DIR``.

Learns unitary operators y = Ux + ε (paper §3) for every unit of the config and
writes WORKDIR/report.md. Variants and flags: `lie_unitary.experiments.operators.config`
and `lie_unitary.experiments.launch`.
"""

from lie_unitary.experiments import launch

if __name__ == "__main__":
  launch.main("operators")
