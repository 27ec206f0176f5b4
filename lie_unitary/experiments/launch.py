"""The command line of every experiment family: flags → `runner.train_and_evaluate` → report.

A family's ``__main__.py`` calls ``main(FAMILY, path of its config.py)``:

    python -m lie_unitary.experiments.FAMILY --config=VARIANT --workdir=DIR
    python -m lie_unitary.experiments.FAMILY --config=path/config.py:VARIANT --workdir=DIR \
        --config.FIELD=VALUE
    python -m lie_unitary.experiments.FAMILY --workdir=DIR --report_only

Flags: --config (a bare NAME is the family's named config file, configs/NAME.py, or the
path of any config file), --workdir,
--report_only, --num_workers, --tensorboard, and for several hosts
--coordinator_address, --num_processes, --process_id (empty: one process; given:
``jax.distributed.initialize`` before anything else, CPU collectives over gloo).

A bad flag, config name or config field ends the program with ONE line on stderr (exit
status 2); the first Ctrl-C (SIGINT/SIGTERM) stops at the
next checkpoint and exits 0; the same command resumes. Results, checkpoints and the
report go to the workdir (`lie_unitary.experiments.runner`).

OPENBLAS_NUM_THREADS defaults to 1: jaxlib's CPU eigh runs on OpenBLAS (scipy's,
loaded at the first eigh), whose thread pool fights XLA's on few cores.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Sequence

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__all__ = ["main", "resolve_config_arg"]


def resolve_config_arg(argv: Sequence[str], default_config_path: str) -> list[str]:
  """`argv` with a bare ``--config=VARIANT`` turned into ``--config=DEFAULT:VARIANT``.

  A value with a path separator, a '.py' or a ':' is a path form and kept as it is.
  """
  out = list(argv)
  for i, arg in enumerate(out):
    if arg.startswith("--config="):
      head, value = "--config=", arg[len("--config="):]
    elif arg == "--config" and i + 1 < len(out):
      head, value, i = "", out[i + 1], i + 1
    else:
      continue
    if value and not any(s in value for s in (os.sep, "/", ".py", ":")):
      out[i] = f"{head}{default_config_path}:{value}"
  return out


def _split_comma_lists(config) -> None:
  """--config.model=gurnn,lstm gives ('gurnn,lstm',) (ml_collections parses a tuple
  of strings so): split such elements into ('gurnn', 'lstm'), in place, recursively."""
  for key, value in config.items():
    if hasattr(value, "items"):
      _split_comma_lists(value)
    elif isinstance(value, tuple) and any(isinstance(v, str) and "," in v for v in value):
      config[key] = tuple(p.strip() for v in value
                          for p in (v.split(",") if isinstance(v, str) else [v])
                          if not isinstance(p, str) or p.strip())


def _one_line(error) -> str:
  return " ".join(str(error).split())


def _parse_flags(argv):
  from absl import flags
  try:
    return flags.FLAGS(argv)
  except (AttributeError, KeyError) as e:
    # ml_collections' error for an override of a field the config does not have.
    name = _one_line(e).strip("\"' ")
    print(f"error: the config has no field {name!r} (--config.{name}=...).", file=sys.stderr)
    sys.exit(2)
  except (flags.Error, TypeError, ValueError) as e:
    print(f"error: {_one_line(e)}", file=sys.stderr)
    sys.exit(2)


def _initialize_distributed(flag_values) -> None:
  from absl import app
  import jax
  address, count, index = (flag_values.coordinator_address, flag_values.num_processes,
                           flag_values.process_id)
  if not address and count is None and index is None:
    return
  if not address or count is None or index is None:
    raise app.UsageError("--coordinator_address, --num_processes and --process_id go "
                         "together (all or none).")
  # Collectives across CPU processes (gathering results) need an implementation;
  # accelerators bring their own.
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(coordinator_address=address, num_processes=count,
                             process_id=index)


def _launch(family_name: str, argv) -> None:
  from absl import app
  from absl import flags
  from absl import logging
  flag_values = flags.FLAGS
  if not flag_values["verbosity"].present:  # orbax logs every checkpoint step at INFO
    logging.set_verbosity(logging.WARNING)
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  _initialize_distributed(flag_values)
  import jax

  from lie_unitary.experiments import runner
  family = runner.get_family(family_name)
  workdir = flag_values.workdir
  if flag_values.report_only:
    if not os.path.isdir(workdir):
      raise app.UsageError(f"--workdir={workdir}: no such folder.")
    if not runner.holds_results(workdir, family_name):
      raise app.UsageError(f"{workdir} holds no {family_name} results "
                           f"(no WORKDIR/launches/*.json of family {family_name!r}).")
  else:
    config = flag_values.config
    if config is None:
      raise app.UsageError("--config is required unless --report_only.")
    _split_comma_lists(config)
    try:
      summary = runner.train_and_evaluate(family, config, workdir,
                                          num_workers=flag_values.num_workers,
                                          tensorboard=flag_values.tensorboard)
    except runner.ConfigError as e:
      raise app.UsageError(_one_line(e)) from e
    if summary.interrupted:
      return
  if jax.process_index() == 0:
    for path in family.write_report(workdir):
      print(f"wrote {path}")


def _main(family_name: str, argv) -> None:
  from absl import app
  try:
    _launch(family_name, argv)
  except app.UsageError as e:
    print(f"error: {_one_line(e)}", file=sys.stderr)
    sys.exit(2)


def main(family_name: str, default_config_path: str | None = None,
         argv: Sequence[str] | None = None) -> None:
  """Defines the flags and runs the launcher of `family_name` (the family's ``__main__``).

  Args:
    family_name: 'rnn' or 'operators' (`runner.FAMILIES`).
    default_config_path: the family's config.py (default: the package's
      ``experiments/<family>/config.py``); ``--config=VARIANT`` means
      ``--config=default_config_path:VARIANT``.
    argv: the command line (default `sys.argv`).
  """
  from absl import app
  from absl import flags
  from ml_collections import config_flags
  if default_config_path is None:
    default_config_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), family_name,
                                       "config.py")
  config_flags.DEFINE_config_file(
      "config", None, f"VARIANT of {default_config_path}, or path/config.py:VARIANT; "
      "fields overridable as --config.FIELD=VALUE.", lock_config=True)
  flags.DEFINE_string("workdir", None, "Folder of the results, checkpoints, launches and "
                      "the report (created).")
  flags.DEFINE_bool("report_only", False, "Only (re)write the report of WORKDIR's results.")
  flags.DEFINE_integer("num_workers", 1, "Worker processes sharing the units (CPU hosts: "
                       "each keeps about one core busy).")
  flags.DEFINE_bool("tensorboard", False, "Also write TensorBoard events under "
                    "WORKDIR/tensorboard (needs tensorboardX).")
  flags.DEFINE_string("coordinator_address", "", "host:port of process 0, for a run over "
                      "several processes/hosts (jax.distributed); empty: one process.")
  flags.DEFINE_integer("num_processes", None, "Number of processes (with --coordinator_address).")
  flags.DEFINE_integer("process_id", None, "This process's index (with --coordinator_address).")
  flags.mark_flag_as_required("workdir")
  argv = list(sys.argv if argv is None else argv)
  try:
    argv = _named_config_files(argv, family_name)
  except ValueError as e:
    print(f"error: {_one_line(e)}", file=sys.stderr)
    sys.exit(2)
  argv = resolve_config_arg(argv, default_config_path)
  app.run(functools.partial(_main, family_name), argv=argv, flags_parser=_parse_flags)


def _named_config_files(argv: list[str], family_name: str) -> list[str]:
  """A bare ``--config=NAME`` as the path of the family's config file NAME (configs/).

  Raises:
    ValueError: NAME is not one of the family's named configs.
  """
  import importlib

  from lie_unitary.experiments import config_files
  named = importlib.import_module(f"lie_unitary.experiments.{family_name}.config").NAMED_CONFIGS
  out = list(argv)
  for i, arg in enumerate(out):
    if arg.startswith("--config="):
      value, at = arg[len("--config="):], i
    elif arg == "--config" and i + 1 < len(out):
      value, at = out[i + 1], i + 1
    else:
      continue
    if value and not any(s in value for s in (os.sep, "/", ".py", ":")):
      path = config_files.path(named, value, family_name)
      out[at] = f"--config={path}" if at == i else path
  return out
