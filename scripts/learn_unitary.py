r"""Learns unitary operators y = Ux + ε and writes the report (paper §3, Tables 1-2).

  python scripts/learn_unitary.py --config=table1 --workdir=runs/table1
  python scripts/learn_unitary.py --workdir=runs/table1 --report_only

The same as ``python -m lie_unitary.experiments.operators`` (docs/reproduction.md).
"""

from lie_unitary.experiments import launch

if __name__ == "__main__":
  launch.main("operators")
