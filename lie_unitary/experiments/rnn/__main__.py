r"""Trains RNNs on the adding / memory problems and writes the report (paper §4, Figure 3).

  python -m lie_unitary.experiments.rnn --config=VARIANT --workdir=runs/NAME
  python -m lie_unitary.experiments.rnn --config=path/config.py:VARIANT --workdir=runs/NAME
  python -m lie_unitary.experiments.rnn --workdir=runs/NAME --report_only

VARIANT: adding, memory, copy_long, adding_long or smoke (this package's config.py,
which documents every field, the runtimes and the expected results). Flags:
lie_unitary.experiments.launch.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from lie_unitary.experiments import launch  # noqa: E402

if __name__ == "__main__":
  launch.main("rnn", os.path.join(os.path.dirname(os.path.abspath(__file__)), "config.py"))
