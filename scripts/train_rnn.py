r"""Trains RNNs on the adding / memory problems (paper §4, Figure 3) and the sequential
image tasks (pixel-by-pixel and permuted MNIST-family sets), and writes the report.

  python scripts/train_rnn.py --config=configs/memory.py --workdir=runs/memory
  python scripts/train_rnn.py --config=memory --workdir=runs/memory   # by name
  python scripts/train_rnn.py --workdir=runs/memory --report_only

The same as ``python -m lie_unitary.experiments.rnn`` (flags:
`lie_unitary.experiments.launch`; the experiments: configs/; the fields:
`lie_unitary.experiments.rnn.config`).
"""

from lie_unitary.experiments import launch

if __name__ == "__main__":
  launch.main("rnn")
