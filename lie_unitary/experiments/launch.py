"""The command-line launcher shared by both experiment families (absl + ml_collections).

``python -m lie_unitary.experiments.operators --config=VARIANT --workdir=DIR`` and
``python -m lie_unitary.experiments.rnn ...`` (and the thin `scripts/` wrappers) call
`main(family)`. ``--config`` takes a variant of the family's own config file
(``--config=smoke``), or any config file with a variant
(``--config=path/to/config.py:smoke``); fields are overridden with
``--config.FIELD=VALUE``. Flags:

- ``--workdir`` (required): where results, checkpoints, launches and the report go;
- ``--report_only``: only re-render the report of a workdir holding this family's
  results;
- ``--num_workers=N``: N worker processes share the units (CPU hosts);
- ``--tensorboard``: TensorBoard events beside the JSONL (needs tensorboardX);
- ``--coordinator_address``, ``--num_processes``, ``--process_id``: a multi-process
  (multi-host) run; every process runs the same command with its own id, replicates
  are sharded over all processes' devices and process 0 writes the records.
  ``--distributed`` alone auto-detects them (SLURM, Open MPI, TPU pods).

A config error prints one line; the first Ctrl-C (SIGINT) or SIGTERM finishes the
current chunk, checkpoints and exits 0; a second aborts.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

__all__ = ["expand_config_argument", "main"]


def expand_config_argument(argv: Sequence[str], default_config: str) -> list[str]:
  """``--config=VARIANT`` (no file) becomes ``--config=<default_config>:VARIANT``."""
  out = []
  for arg in argv:
    if arg.startswith("--config="):
      value = arg[len("--config="):]
      path = value.split(":", 1)[0]
      if not path.endswith(".py") and not os.path.exists(path):
        arg = f"--config={default_config}:{value}"
    out.append(arg)
  return out


def _init_distributed(address, num_processes, process_id, auto):
  import jax  # pylint: disable=import-outside-toplevel
  if not (address or auto):
    return
  # Collectives between CPU devices of several processes (harmless on GPU/TPU hosts).
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(coordinator_address=address or None,
                             num_processes=num_processes if num_processes > 0 else None,
                             process_id=process_id if process_id >= 0 else None)


def main(family_name: str, argv: Sequence[str] | None = None) -> None:
  """Defines the flags, parses `argv` (default sys.argv) and runs the family."""
  os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before jax: see the README
  from absl import app, flags  # pylint: disable=import-outside-toplevel
  from ml_collections import config_flags  # pylint: disable=import-outside-toplevel
  from lie_unitary.experiments import runner  # pylint: disable=import-outside-toplevel

  default_config = os.path.join(os.path.dirname(os.path.abspath(__file__)), family_name,
                                "config.py")
  argv = expand_config_argument(list(sys.argv if argv is None else argv), default_config)
  config_flag = config_flags.DEFINE_config_file(
      "config", None, f"VARIANT of {default_config}, or path/config.py:VARIANT.",
      lock_config=True, sys_argv=argv)
  workdir = flags.DEFINE_string("workdir", None, "Results, checkpoints, launches, report.",
                                required=True)
  report_only = flags.DEFINE_bool("report_only", False, "Only re-render the report.")
  num_workers = flags.DEFINE_integer("num_workers", 1, "Worker processes sharing the units.")
  tensorboard = flags.DEFINE_bool("tensorboard", False, "Also write TensorBoard events.")
  address = flags.DEFINE_string("coordinator_address", "", "host:port of process 0 "
                                "(multi-process runs).")
  num_processes = flags.DEFINE_integer("num_processes", 0, "Processes of a multi-process run.")
  process_id = flags.DEFINE_integer("process_id", -1, "This process's id (0 writes records).")
  distributed = flags.DEFINE_bool("distributed", False, "jax.distributed.initialize() with "
                                  "auto-detected settings (SLURM, Open MPI, TPU pods).")

  def run(args):
    if len(args) > 1:
      raise app.UsageError(f"unexpected arguments: {args[1:]}")
    _init_distributed(address.value, num_processes.value, process_id.value, distributed.value)
    import jax  # pylint: disable=import-outside-toplevel
    family = runner.get_family(family_name)
    if not report_only.value:
      if config_flag.value is None:
        raise app.UsageError("--config is required unless --report_only.")
      try:
        summary = runner.train_and_evaluate(family, config_flag.value, workdir.value,
                                            num_workers=num_workers.value,
                                            tensorboard=tensorboard.value)
      except runner.ConfigError as e:
        raise app.UsageError(str(e)) from None
      if summary.interrupted:
        print("stopped; finished units are recorded. Rerun the same command to resume.")
        return
    elif not runner.holds_results(workdir.value, family_name):
      raise app.UsageError(f"{workdir.value} holds no {family_name} results (no "
                           "launches/*.json of that family).")
    if jax.process_index() == 0:
      for path in family.write_report(workdir.value):
        print(f"wrote {path}")

  try:  # a bad flag or override is one line, not a traceback
    args = flags.FLAGS(argv)
  except (flags.Error, AttributeError, KeyError, TypeError, ValueError) as e:
    message = str(e).strip().strip('"').strip("'")
    sys.stderr.write(f"FATAL flags or config error: {type(e).__name__}: {message}\n")
    sys.exit(2)
  try:
    run(args)
  except app.UsageError as e:
    sys.stderr.write(f"FATAL {e}\n")
    sys.exit(2)
