r"""Trains RNNs on the adding / memory problems and writes the report (paper §4, Figure 3).

The same launcher as ``python -m lie_unitary.experiments.rnn``:

  python scripts/train_rnn.py --config=lie_unitary/experiments/rnn/config.py:memory \
      --workdir=runs/memory
  python scripts/train_rnn.py --config=memory --workdir=runs/memory
  python scripts/train_rnn.py --workdir=runs/memory --report_only

See lie_unitary/experiments/rnn/config.py for the variants and fields, and
lie_unitary/experiments/launch.py for the flags.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from lie_unitary.experiments import launch  # noqa: E402
from lie_unitary.experiments.rnn import config as rnn_config  # noqa: E402

if __name__ == "__main__":
  launch.main("rnn", os.path.abspath(rnn_config.__file__))
