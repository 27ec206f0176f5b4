"""The command line of every experiment family: flags → `runner.train_and_evaluate` → report."""

import os
import sys
from typing import Sequence

from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from lie_unitary.experiments import fields

# Before numpy loads (none of the above loads it): jaxlib's eigh's threads fight XLA's.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _split_comma_lists(config) -> None:
  """Splits, in place, the ('gurnn,lstm',) and ('(gurnn,)',) that ml_collections parses."""
  pieces = lambda v: [p.strip(" ()[]'\"") for p in v.split(",")] if isinstance(v, str) else [v]
  for key, value in config.items():
    if hasattr(value, "items"):
      _split_comma_lists(value)
    elif isinstance(value, tuple) and any(isinstance(v, str) and ("," in v or v[:1] in "([")
                                          for v in value):
      config[key] = tuple(p for v in value for p in pieces(v) if p != "")


def _fail(message) -> None:
  print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
  sys.exit(2)


def _parse_flags(argv):
  given = [a.split("=", 1)[0] for a in argv[1:] if a.startswith("--config.")]
  twice = sorted({a for a in given if given.count(a) > 1})
  if twice:  # ml_collections would append to a tuple field: one value per field
    _fail(f"{twice[0]} is given more than once; give it once (a tuple as {twice[0]}=a,b).")
  try:
    return flags.FLAGS(argv)
  except (AttributeError, KeyError) as e:  # an override of a field the config lacks
    for flag in given:
      config, parts = flags.FLAGS["config"].parser.loaded, flag[len("--config."):].split(".")
      for i, part in enumerate(parts):
        known = config.keys() if hasattr(config, "keys") else ()
        if part not in known:
          _fail(fields.unknown_field(part, known, "".join(p + "." for p in parts[:i])))
        config = config[part]
    _fail(e)
  except (flags.Error, TypeError, ValueError) as e:
    _fail(e)


class _NamedConfigs(flags.ArgumentParser):
  """ml_collections' config file parser `inner`, taking a config NAME of `family` too."""
  loaded = None

  def __init__(self, family: str, inner):
    self.family, self.inner = family, inner

  def parse(self, path):
    if path and not any(s in path for s in (os.sep, "/", ".py", ":")):
      path = fields.config_path(self.family, path)  # ValueError: an unknown name
    if not os.path.isfile(path.split(":", 1)[0]):
      raise ValueError(f"no config file {path.split(':', 1)[0]}.")
    try:
      self.loaded = self.inner.parse(path)
    except Exception as e:  # ml_collections' message holds the file's whole traceback
      raise ValueError(f"cannot load config file {path}: {str(e).strip().splitlines()[-1]}")
    return self.loaded

  def flag_type(self):
    return self.inner.flag_type()


def cpu_cores() -> int:
  """The CPU cores this process may run on."""
  return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _start_jax(flag_values) -> None:
  """CPU devices (XLA_FLAGS' count wins), jax.distributed and the compilation cache."""
  import jax
  address, count, index = (flag_values.coordinator_address, flag_values.num_processes,
                           flag_values.process_id)
  forced = "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", "")
  if not forced and (flag_values["cpu_devices"].present or not address):  # a run's: one each
    jax.config.update("jax_num_cpu_devices", flag_values.cpu_devices or cpu_cores())
  if address or count is not None or index is not None:
    if not address or count is None or index is None:
      _fail("--coordinator_address, --num_processes and --process_id go together.")
    # Collectives across CPU processes need an implementation; accelerators bring theirs.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=address, num_processes=count, process_id=index)
  if flag_values.compilation_cache and not jax.config.jax_compilation_cache_dir:
    jax.config.update("jax_compilation_cache_dir",
                      os.path.expanduser(flag_values.compilation_cache))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
      jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)


def _launch(family_name: str, argv) -> int | None:
  """Runs the launch the parsed flags ask for."""
  flag_values = flags.FLAGS
  if not flag_values["verbosity"].present:  # orbax logs every checkpoint step at INFO
    logging.set_verbosity(logging.WARNING)
  if len(argv) > 1:
    _fail(f"unexpected arguments: {argv[1:]}")
  _start_jax(flag_values)
  import jax

  from lie_unitary.experiments import runner
  from lie_unitary.experiments import workdir as workdir_lib
  family, workdir = runner.get_family(family_name), flag_values.workdir
  if flag_values.report_only:
    if flag_values["config"].present:  # the report reads the workdir alone
      _fail("--report_only writes the report of WORKDIR's records alone: drop --config.")
    if not os.path.isdir(workdir):
      _fail(f"--workdir={workdir}: no such folder.")
    if not any(la.get("family") == family_name for la in workdir_lib.read_launches(workdir)):
      _fail(f"{workdir} holds no {family_name} results (no launch file of that family).")
    if not workdir_lib.read(workdir):
      _fail(f"{workdir} holds no records yet (WORKDIR/results.jsonl).")
  else:
    config = flag_values.config
    if config is None:
      _fail("--config is required unless --report_only.")
    _split_comma_lists(config)
    try:
      summary = runner.train_and_evaluate(
          family, config, workdir,
          resume_across_code_change=flag_values.resume_across_code_change,
          restart_lost_units=flag_values.restart_lost_units)
    except runner.ConfigError as e:
      _fail(e)
    if summary.stopped_by:
      return interrupted_status(summary.stopped_by)
    if summary.elsewhere:
      print(f"{summary.elsewhere} unit(s) still running in other processes (above): done here.")
    if not workdir_lib.read(workdir):
      return  # nothing recorded yet: no report
  if jax.process_index() == 0:
    for path in family.write_report(workdir):
      print(f"wrote {path}")


def interrupted_status(stopped_by: str) -> int:
  """128 + the number of the signal `stopped_by`, else 1."""
  import signal
  return 128 + signal.Signals[stopped_by] if stopped_by in signal.Signals.__members__ else 1


def main(family_name: str, argv: Sequence[str] | None = None) -> None:
  """Defines the flags and runs the launcher of `family_name` ('rnn', 'operators' or 'basis';
  a family's ``__main__``) on `argv` (default `sys.argv`)::

    python -m lie_unitary.experiments.FAMILY --config=NAME --workdir=DIR [--config.FIELD=VALUE]
    python -m lie_unitary.experiments.FAMILY --workdir=DIR --report_only

  NAME: a config file of configs/, or a file's path. A bad flag, config name or field ends
  the program with one line on stderr (exit status 2); the first SIGINT/SIGTERM stops at
  the next checkpoint (exit status 128 + the signal), and the same command resumes.
  """
  config_flags.DEFINE_config_file(
      "config", None, f"A named config ({', '.join(sorted(fields.named_configs(family_name)))})"
      " or the path of a config file; fields overridable as --config.FIELD=VALUE.",
      lock_config=True)
  flags.DEFINE_string("workdir", None, "Folder of the results, checkpoints and report.")
  flags.DEFINE_bool("report_only", False, "Only (re)write the report of WORKDIR's results.")
  flags.DEFINE_bool("resume_across_code_change", False, "Resume a checkpoint that other code "
                    "wrote (package files or jax/jaxlib/flax/optax versions); else refused.")
  flags.DEFINE_bool("restart_lost_units", False, "Restart from step 0, replacing its records, "
                    "an unfinished unit with records but no checkpoint; else refused.")
  flags.DEFINE_integer("cpu_devices", 0, "CPU devices of this host (0: one per core); "
                       "XLA_FLAGS' --xla_force_host_platform_device_count wins.", lower_bound=0)
  cache = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                       "lie_unitary", "xla")
  flags.DEFINE_string("compilation_cache", cache, "jax's persistent compilation cache ('': "
                      "none); JAX_COMPILATION_CACHE_DIR wins.")
  flags.DEFINE_string("coordinator_address", "", "host:port of process 0 of a run over "
                      "several processes (jax.distributed); empty: one process.")
  flags.DEFINE_integer("num_processes", None, "Number of processes (with --coordinator_address).")
  flags.DEFINE_integer("process_id", None, "This process's index (with --coordinator_address).")
  flags.mark_flag_as_required("workdir")
  config_flag = flags.FLAGS["config"]
  config_flag.parser = _NamedConfigs(family_name, config_flag.parser)  # --config=NAME too
  app.run(lambda args: _launch(family_name, args),
          argv=list(sys.argv if argv is None else argv), flags_parser=_parse_flags)
