r"""Trains RNNs on the adding / memory problems (paper §4) and the sequential image tasks.

  python scripts/train_rnn.py --config=memory --workdir=runs/memory
  python scripts/train_rnn.py --workdir=runs/memory --report_only

The same as ``python -m lie_unitary.experiments.rnn`` (docs/rnn.md).
"""

from lie_unitary.experiments import launch

if __name__ == "__main__":
  launch.main("rnn")
