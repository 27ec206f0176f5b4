r"""Learns unitary operators y = Ux + ε and writes the report (paper §3, Tables 1-2).

  python scripts/learn_unitary.py --config=lie_unitary/experiments/operators/config.py:table1 \
      --workdir=runs/table1
  python scripts/learn_unitary.py --workdir=runs/table1 --report_only

Results go to WORKDIR/results.jsonl (one record per n, approach, generator,
replicate) and WORKDIR/curves.jsonl as the run goes; rerunning with the same workdir
skips finished settings. At the end WORKDIR/report.md, figure2.png (and
basis_change.png for the appendix-B variant) are written. See lie_unitary/experiments/operators/config.py
for the variants and docs/reproduction.md for commands, runtimes and results.

OPENBLAS_NUM_THREADS defaults to 1: jaxlib's CPU eigh runs on OpenBLAS, whose thread
pool fights XLA's on few cores (SPEC §5). On several hosts set LIE_UNITARY_DISTRIBUTED=1
(the launcher calls `jax.distributed.initialize()`): replicates are then sharded over
every host's devices and process 0 writes the records (docs/reproduction.md).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
from ml_collections import config_flags  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", None, "lie_unitary/experiments/operators/config.py:VARIANT",
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string("workdir", None, "Directory of results.jsonl, curves.jsonl, "
                               "report.md and the figures.")
_REPORT_ONLY = flags.DEFINE_bool("report_only", False, "Only (re)write the report from "
                                 "WORKDIR/results.jsonl.")
_NUM_WORKERS = flags.DEFINE_integer(
    "num_workers", 1, "Worker processes sharing the settings (each takes the next unclaimed "
    "one; lie_unitary.workers). On a 2-core CPU, 2 roughly halves the wall time.")
flags.mark_flag_as_required("workdir")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  import jax  # pylint: disable=import-outside-toplevel
  from lie_unitary.experiments import workers  # pylint: disable=import-outside-toplevel
  from lie_unitary.experiments.operators import experiment as operator_sweep  # pylint: disable=import-outside-toplevel
  from lie_unitary.experiments.operators import report  # pylint: disable=import-outside-toplevel
  if os.environ.get("LIE_UNITARY_DISTRIBUTED") == "1":
    # Auto-detected on SLURM, Open MPI, TPU pods; otherwise set JAX_COORDINATOR_ADDRESS
    # and these two (docs/reproduction.md, "Multi-host use").
    num = os.environ.get("LIE_UNITARY_NUM_PROCESSES")
    pid = os.environ.get("LIE_UNITARY_PROCESS_ID")
    jax.distributed.initialize(num_processes=int(num) if num else None,
                               process_id=int(pid) if pid else None)
  if not _REPORT_ONLY.value:
    if _CONFIG.value is None:
      raise app.UsageError("--config is required unless --report_only.")
    if not workers.run_sweep(
        _NUM_WORKERS.value, _WORKDIR.value,
        check=lambda: operator_sweep.validate_config(_CONFIG.value),
        sweep=lambda: operator_sweep.run_experiment(_CONFIG.value, _WORKDIR.value)):
      return  # a worker: the parent writes the report once every worker is done
  if jax.process_index() == 0:
    for path in report.write_report(_WORKDIR.value):
      print(f"wrote {path}")


if __name__ == "__main__":
  app.run(main)
