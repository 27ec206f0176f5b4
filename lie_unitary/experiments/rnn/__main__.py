"""Trains RNNs on the adding / memory problems (paper §4) and sequential images.

  python -m lie_unitary.experiments.rnn --config=NAME --workdir=runs/NAME
  python -m lie_unitary.experiments.rnn --config=configs/memory.py --workdir=runs/NAME
  python -m lie_unitary.experiments.rnn --workdir=runs/NAME --report_only

NAME: adding, memory, copy_long, adding_long, pixel_mnist, permuted_mnist or rnn_smoke (files
of configs/); fields: `rnn.config`; flags: `lie_unitary.experiments.launch`.
"""

from lie_unitary.experiments import launch

if __name__ == "__main__":
  launch.main("rnn")
