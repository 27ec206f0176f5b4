"""Several worker processes sharing one sweep's units of work (CPU hosts).

One jitted program keeps about one CPU core busy on these problems (small matrices,
sequential loops), and two programs in ONE process cannot overlap safely: jaxlib's
CPU LAPACK kernels can deadlock the intra-op pool when two are in flight
(`lie_unitary.sequencing`). Separate processes have separate pools, so a launcher
with ``--num_workers=N`` re-runs itself N times as workers and waits for them:

- every worker builds the same ordered list of units (settings, (model, T) pairs)
  and takes the next one nobody has taken by creating a claim file with O_EXCL in a
  directory fresh to this launch, so the work is shared dynamically (longest units
  first where the caller orders them so) and no unit runs twice;
- workers append their records to the same JSONL files (`records.append_records`
  locks the file), so resume works exactly as with one process: a rerun skips
  finished units, whichever worker wrote them;
- the parent renders the report once every worker has finished.

The parent and its workers talk only through two environment variables, so the
workers run the launcher's ordinary code path.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Callable, Sequence

__all__ = ["claimer_from_env", "is_worker", "num_workers", "run_sweep", "run_workers",
           "worker_prefix"]

_ENV_WORKER = "LIE_UNITARY_WORKER"  # "i/N" in a worker process
_ENV_CLAIMS = "LIE_UNITARY_CLAIMS_DIR"  # the launch's claim directory


def is_worker() -> bool:
  """Whether this process is a worker started by `run_workers`."""
  return _ENV_WORKER in os.environ


def num_workers() -> int:
  """N in a worker of N processes, 1 otherwise."""
  return int(os.environ[_ENV_WORKER].split("/")[1]) if is_worker() else 1


def worker_prefix() -> str:
  """'[worker i/N] ' in a worker, '' otherwise (for progress lines)."""
  return f"[worker {os.environ[_ENV_WORKER]}] " if is_worker() else ""


def claimer_from_env() -> Callable[[str], bool] | None:
  """In a worker: ``claim(unit_id) -> bool``, True for exactly one worker per unit id.

  Returns None outside a worker (everything is this process's to run).
  """
  directory = os.environ.get(_ENV_CLAIMS)
  if not is_worker() or not directory:
    return None

  def claim(unit_id: str) -> bool:
    path = os.path.join(directory, unit_id.replace(os.sep, "_"))
    try:
      os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
      return False
    return True

  return claim


def run_workers(num_workers: int, workdir: str, argv: Sequence[str] | None = None,
                printer=print) -> None:
  """Runs this program (``sys.executable`` + `argv`) as `num_workers` workers; waits.

  Args:
    num_workers: N ≥ 1 processes.
    workdir: the run's folder; the claim directory is made (and removed) inside it.
    argv: the command line to re-run, default `sys.argv` (the workers see
      `is_worker()` and run the sweep instead of spawning).
    printer: where the start and end lines go (workers print to the same stdout).

  Raises:
    ValueError: if num_workers < 1.
    RuntimeError: if a worker exits with an error (after all have stopped), naming it.
  """
  if num_workers < 1:
    raise ValueError(f"num_workers must be ≥ 1; got {num_workers}.")
  argv = list(sys.argv if argv is None else argv)
  os.makedirs(workdir, exist_ok=True)
  claims = tempfile.mkdtemp(prefix=".claims-", dir=workdir)
  printer(f"starting {num_workers} worker processes → {workdir}")
  procs = []
  try:
    for i in range(num_workers):
      env = dict(os.environ, PYTHONUNBUFFERED="1",  # progress lines as they happen
                 **{_ENV_WORKER: f"{i}/{num_workers}", _ENV_CLAIMS: claims})
      procs.append(subprocess.Popen([sys.executable] + argv, env=env))
    codes = [p.wait() for p in procs]
  finally:
    for p in procs:  # the parent was interrupted: do not leave workers running
      if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        p.wait()
    shutil.rmtree(claims, ignore_errors=True)
  failed = [f"worker {i} (exit code {c})" for i, c in enumerate(codes) if c != 0]
  if failed:
    raise RuntimeError(f"{', '.join(failed)} failed; finished units are recorded, rerun "
                       "the same command to resume.")


def run_sweep(num_workers: int, workdir: str, check: Callable[[], object],
              sweep: Callable[[], object]) -> bool:
  """A launcher's sweep: in this process (N = 1, or in a worker) or as N workers.

  Args:
    num_workers: the launcher's ``--num_workers``.
    workdir: the run's folder.
    check: validates the config; called before spawning, so a bad config fails once
      here rather than in every worker.
    sweep: runs (or resumes) the sweep in this process.

  Returns:
    Whether this process should write the report (False in a worker: its parent does).
  """
  if num_workers > 1 and not is_worker():
    check()
    run_workers(num_workers, workdir)
  else:
    sweep()
  return not is_worker()
