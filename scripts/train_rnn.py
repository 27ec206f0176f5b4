r"""Trains RNNs on the adding / memory problems and writes the report (paper §4, Figure 3).

  python scripts/train_rnn.py --config=lie_unitary/experiments/rnn/config.py:memory --workdir=runs/memory
  python scripts/train_rnn.py --workdir=runs/memory --report_only

Results go to WORKDIR/results.jsonl as the run goes (rerun to resume); at the end
WORKDIR/report.md and one Figure-3-style PNG per (task, T) are written. See
lie_unitary/experiments/rnn/config.py for the variants and docs/rnn.md for commands, runtimes and results.

OPENBLAS_NUM_THREADS defaults to 1: jaxlib's CPU eigh runs on OpenBLAS, whose thread
pool fights XLA's on few cores (SPEC §5).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from lie_unitary.experiments import workers  # noqa: E402
from lie_unitary.experiments.rnn import report as rnn_report  # noqa: E402
from lie_unitary.experiments.rnn import training as rnn_training  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", None, "lie_unitary/experiments/rnn/config.py:VARIANT",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of results.jsonl, checkpoints, "
                               "report.md and the figures.")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "Only (re)write the report from "
                                 "WORKDIR/results.jsonl.")
_NUM_WORKERS = flags.DEFINE_integer(
    "num_workers", 1, "Worker processes sharing the units (each takes the next unclaimed "
    "one; lie_unitary.workers). On a 2-core CPU, 2 roughly halves the wall time.")
flags.mark_flag_as_required("workdir")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not _REPORT_ONLY.value:
    if _CONFIG.value is None:
      raise app.UsageError("--config is required unless --report_only.")
    if not workers.run_sweep(
        _NUM_WORKERS.value, _WORKDIR.value, check=lambda: rnn_training.units(_CONFIG.value),
        sweep=lambda: rnn_training.train_and_evaluate(_CONFIG.value, _WORKDIR.value)):
      return  # a worker: the parent writes the report once every worker is done
  for path in rnn_report.write_report(_WORKDIR.value):
    print(f"wrote {path}")


if __name__ == "__main__":
  app.run(main)
