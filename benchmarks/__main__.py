r"""One entry point for every benchmark: `python -m benchmarks SUBJECT [flags]`.

  expm              derivatives through U(λ): eigh vs Padé vs the paper's rule, jvp, jacfwd
  principal_branch  training steps of the principal-branch approaches (operators, n ≥ 64)
  rnn               RNN training throughput: models, the guRNN's constraint vs `free`,
                    the recurrence's matmuls alone, data parallelism, image-task epochs
  ceiling           each RNN's training and evaluation against the machine's GEMM peak and
                    its recurrence's chain of products, in GFLOP/s
  profile           where one image-model training update goes, phase by phase
  layers            orthogonal layers at the sizes people use (tall, wide, square) beside
                    PyTorch's three maps: init, forward, gradient, peak memory
  torch             beside PyTorch: orthogonal layers, the image-task training step
  torch_reference   the PyTorch expRNN trained on an image task (accuracy reference)
  runner            the experiment runner's overhead against its bare training loop

Each prints one Markdown table (`--json=FILE` also writes it); `SUBJECT --helpfull` lists
its flags; docs/benchmarks.md says more.
"""

import importlib
import sys

from absl import app
from absl import flags

import benchmarks  # noqa: F401  (sets OPENBLAS_NUM_THREADS before jax loads)

SUBJECTS = {"expm": ("expm", "main"), "principal_branch": ("principal_branch", "main"),
            "rnn": ("rnn", "main"), "ceiling": ("ceiling", "main"),
            "profile": ("profile", "main"), "layers": ("layers", "main"),
            "torch": ("vs_torch", "main"),
            "torch_reference": ("vs_torch", "train_reference"),
            "runner": ("runner_overhead", "main")}


def main() -> None:
  if len(sys.argv) < 2 or sys.argv[1] not in SUBJECTS:
    sys.exit(__doc__ + f"\nusage: python -m benchmarks {{{','.join(SUBJECTS)}}} [flags]")
  module_name, function = SUBJECTS[subject := sys.argv[1]]
  module = importlib.import_module(f"benchmarks.{module_name}")  # defines its flags
  for name, loaded in list(sys.modules.items()):  # --helpshort lists the subject's flags
    if name.startswith("benchmarks."):
      flags.adopt_module_key_flags(loaded)
  sys.modules["__main__"].__doc__ = module.__doc__  # --help: the subject's docstring
  app.run(getattr(module, function), argv=[f"benchmarks {subject}"] + sys.argv[2:])


if __name__ == "__main__":
  main()
