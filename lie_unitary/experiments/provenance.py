"""What produced a workdir's results: library versions, devices, the git commit.

Every launch of an experiment writes its config and this provenance to
``WORKDIR/launches/NNNN-<time>.json`` (never overwritten), beside the list of the
units it asked for.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys
from typing import Any
from typing import Sequence

from lie_unitary.experiments import workdir as workdir_lib

__all__ = ["git_commit", "provenance", "write_launch"]

_PACKAGES = ("lie_unitary", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "chex",
             "numpy", "ml_collections", "absl-py")


def _version(package: str) -> str | None:
  try:
    return importlib.metadata.version(package)
  except importlib.metadata.PackageNotFoundError:
    return None


def git_commit(path: str | None = None) -> dict | None:
  """{'commit': sha, 'dirty': bool} of the git checkout holding `path` (default: this
  package), or None when it is not in a git checkout (an installed wheel)."""
  path = path or os.path.dirname(os.path.abspath(__file__))
  try:
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, capture_output=True,
                         text=True, timeout=10, check=True).stdout.strip()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                            cwd=path, capture_output=True, text=True, timeout=10,
                            check=True).stdout
  except (OSError, subprocess.SubprocessError):
    return None
  return {"commit": sha, "dirty": bool(status.strip())}


def provenance() -> dict:
  """Versions, devices, host, Python, command line and the git commit, as JSON-able dict."""
  import jax
  return {
      "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "versions": {p: _version(p) for p in _PACKAGES},
      "python": sys.version.split()[0],
      "platform": platform.platform(),
      "host": socket.gethostname(),
      "backend": jax.default_backend(),
      "devices": [str(d) for d in jax.devices()],
      "process_index": jax.process_index(),
      "process_count": jax.process_count(),
      "argv": list(sys.argv),
      "env": {k: os.environ[k] for k in ("OPENBLAS_NUM_THREADS", "XLA_FLAGS", "JAX_PLATFORMS")
              if k in os.environ},
      "git": git_commit(),
  }


def write_launch(workdir: str, family: str, config_json: dict, units: Sequence[Any]) -> str:
  """Writes ``WORKDIR/launches/NNNN-<time>.json`` with the config, provenance and units.

  Args:
    workdir: the run's folder (created).
    family: "operators" or "rnn".
    config_json: the config as a JSON-able dict.
    units: the launch's `Unit`s.

  Returns:
    The path written. Earlier launches are never overwritten (NNNN increases; the
    file is created exclusively).
  """
  folder = workdir_lib.path(workdir, workdir_lib.LAUNCHES)
  os.makedirs(folder, exist_ok=True)
  stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
  body: dict[str, Any] = {
      "family": family, "config": config_json, "provenance": provenance(),
      "units": [{"id": u.id, "name": u.name, "fields": dict(u.fields),
                 "target_step": u.target_step} for u in units]}
  text = json.dumps(body, indent=1, sort_keys=True, default=str)
  while True:
    number = len([f for f in os.listdir(folder) if f.endswith(".json")])
    path = os.path.join(folder, f"{number:04d}-{stamp}.json")
    try:
      with open(path, "x", encoding="utf-8") as f:
        f.write(text)
      return path
    except FileExistsError:  # another process took that number: take the next
      stamp += "x"
