"""``python -m lie_unitary.experiments.basis --config=NAME --workdir=DIR`` (`launch.main`)."""

from lie_unitary.experiments import launch

if __name__ == "__main__":
  launch.main("basis")
