"""``python -m lie_unitary.experiments.rnn --config=NAME --workdir=DIR`` (`launch.main`); NAME:
adding, memory, copy_long, adding_long, pixel_mnist, permuted_mnist or rnn_smoke."""

from lie_unitary.experiments import launch

if __name__ == "__main__":
  launch.main("rnn")
