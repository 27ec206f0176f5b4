"""An experiment's workdir: every read and write of its files (launches/, results.jsonl,
curves.jsonl, finished.jsonl, claims/, checkpoints/; the experiments guide lists them)."""

import contextlib
import dataclasses
import datetime
import fcntl
import hashlib
import importlib.metadata
import json
import math
import os
import pathlib
import platform
import socket
import subprocess
import sys
import threading
import time
from typing import Any
from typing import Callable
from typing import Iterable

RESULTS, CURVES, FINISHED = "results.jsonl", "curves.jsonl", "finished.jsonl"
_RECORD_FILES = (RESULTS, CURVES, FINISHED)  # the files whose records name their unit
# A claim not refreshed for STALE seconds belongs to a dead process (on another host).
HEARTBEAT_SECONDS, STALE_SECONDS = 10.0, 60.0
# The records' names of `lie_unitary.principal_branch.SpectrumStats`' fields, in order.
SPECTRUM_FIELDS = ("theta_spread", "theta_max_abs", "min_sinc", "wide_share")
# The records' name of an RNN's ‖U − U₀‖_F / √n (its recurrent matrix from initialisation).
DRIFT_FIELD = "u_drift"


def path(workdir, *names: str) -> str:
  """WORKDIR/name/...: a record file, "checkpoints/<unit slug>", "claims/<unit slug>"."""
  return os.path.join(os.fspath(workdir), *names)


def to_jsonable(value: Any) -> Any:
  """Arrays as lists; NaN and ±inf as the strings 'nan', 'inf', '-inf' (JSON has none)."""
  value = value.tolist() if hasattr(value, "tolist") else value
  if isinstance(value, dict):
    return {str(k): to_jsonable(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [to_jsonable(v) for v in value]
  return repr(value) if isinstance(value, float) and not math.isfinite(value) else value


def append_records(file: str | os.PathLike, records: Iterable[dict],
                   key: Callable[[dict], Any] | None = None) -> None:
  """Appends records as JSON lines, fsynced, under a lock, first cutting off a line a killed
  writer left; with `key`, but those whose key a line has (a rerun after a kill)."""
  records = [to_jsonable(r) for r in records]
  if not records:
    return
  os.makedirs(os.path.dirname(os.path.abspath(file)), exist_ok=True)
  with _locked(file) as f:
    text = f.read()
    if text and not text.endswith(b"\n"):  # a writer killed mid-line
      text = text[:text.rfind(b"\n") + 1]
      f.truncate(len(text))
    if key is not None:
      have = {key(r) for r in _parse_lines(text.decode("utf-8").splitlines())}
      records = [r for r in records if key(r) not in have]
    f.write("".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode("utf-8"))
    f.flush()
    os.fsync(f.fileno())


@contextlib.contextmanager
def _locked(file: str | os.PathLike):
  """`file` opened "ab+" at its start, locked, still at its path (`remove_unit_records`)."""
  while True:
    with open(file, "ab+") as f:  # closing it releases the lock
      fcntl.flock(f, fcntl.LOCK_EX)
      if os.path.exists(file) and os.path.samestat(os.fstat(f.fileno()), os.stat(file)):
        f.seek(0)
        yield f
        return


def unit_records(workdir, unit_id: str) -> int:
  """How many records of unit `unit_id` WORKDIR's record files hold."""
  return sum(r.get("unit") == unit_id for name in _RECORD_FILES for r in read(workdir, name))


def remove_unit_records(workdir, unit_id: str) -> None:
  """Removes unit `unit_id`'s records, each file replaced whole under the appends' lock."""
  for file in [path(workdir, n) for n in _RECORD_FILES if os.path.exists(path(workdir, n))]:
    with _locked(file) as f:
      keep = b"".join(x for x in f.read().splitlines(keepends=True)
                      if not any(r.get("unit") == unit_id for r in _parse_lines([x])))
      with open(f"{file}.{os.getpid()}.tmp", "wb") as out:
        out.write(keep)
        out.flush()
        os.fsync(out.fileno())
      os.replace(out.name, file)


def _parse_lines(lines: Iterable[str]) -> list[dict]:
  out = []
  for line in lines:
    with contextlib.suppress(json.JSONDecodeError):  # a blank line, or one a kill cut
      out.append(json.loads(line))
  return out


def record_key(record: dict) -> tuple:
  """What makes a record one of its kind: (unit, kind, replicate, step, approach)."""
  return tuple(record.get(k) for k in ("unit", "kind", "replicate", "step", "approach"))


def read(workdir, name: str = RESULTS) -> list[dict]:
  """Every complete record of the JSON lines file WORKDIR/name ([] when it does not exist)."""
  with contextlib.suppress(FileNotFoundError), open(path(workdir, name), encoding="utf-8") as f:
    return _parse_lines(f)
  return []


def finished_units(workdir) -> set[tuple[str, int]]:
  """{(unit id, target step)} of the units finished in `workdir`."""
  return {(r["unit"], int(r["step"])) for r in read(workdir, FINISHED)}


def mark_finished(workdir, unit, seconds: float) -> None:
  """Records that `unit` reached its target step in `seconds` of this launch."""
  append_records(path(workdir, FINISHED), [{"unit": unit.id, "name": unit.name, "seconds":
                                             round(seconds, 3), "step": unit.target_step}],
                 key=record_key)


_PACKAGES = ("lie_unitary", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "chex",
             "numpy", "ml_collections", "absl-py")
# Packages whose versions can change a unit's numbers.
_NUMERICS_PACKAGES = ("jax", "jaxlib", "flax", "optax")
# Package files whose text cannot change a unit's numbers: the reports and the downloader.
_NOT_NUMERICS = ("report.py", "download.py")


def _version(package: str) -> str | None:
  with contextlib.suppress(importlib.metadata.PackageNotFoundError):
    return importlib.metadata.version(package)
  return None


def _provenance() -> dict:
  import jax
  cpus, git = [], None  # the CPU's model names (Linux); the checkout's commit (None: a wheel)
  with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
    cpus = [x.split(":", 1)[1].strip() for x in f if x.startswith("model name")]
  with contextlib.suppress(OSError, subprocess.SubprocessError):
    lines = subprocess.run(["git", "status", "--porcelain=v2", "--branch", "--untracked-files=no"],
                           cwd=os.path.dirname(os.path.abspath(__file__)), capture_output=True,
                           text=True, timeout=10, check=True).stdout.splitlines()
    git = {"commit": lines[0].split()[-1], "dirty": any(x[0] != "#" for x in lines)}
  return {
      "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
      "versions": {p: _version(p) for p in _PACKAGES}, "python": sys.version.split()[0],
      "platform": platform.platform(), "host": socket.gethostname(),
      "backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()],
      "process_index": jax.process_index(), "process_count": jax.process_count(),
      "cpu_model": (cpus or [platform.processor()])[0] or None,
      "device_kind": jax.devices()[0].device_kind,
      "argv": list(sys.argv), "env": {  # what can change a unit's numbers or speed
          k: v for k, v in sorted(os.environ.items())
          if k in ("OPENBLAS_NUM_THREADS", "XLA_FLAGS") or k.startswith("JAX_")},
      "git": git}


def code_fingerprint(root: str | None = None) -> dict:
  """{"files": {path: sha256[:16]}} of the *.py below `root` (this package) that compute
  numbers, and {"versions"} of the packages that do."""
  root = pathlib.Path(root or pathlib.Path(__file__).parents[1]).absolute()
  files = {f.relative_to(root.parent).as_posix(): hashlib.sha256(f.read_bytes()).hexdigest()[:16]
           for f in sorted(root.rglob("*.py")) if f.name not in _NOT_NUMERICS}
  return {"files": files, "versions": {p: _version(p) for p in _NUMERICS_PACKAGES}}


def code_changes(old: dict, new: dict) -> list[str]:
  """What differs from fingerprint `old` to `new`, a phrase each ("PATH changed", ...)."""
  before, after = old.get("files", {}), new.get("files", {})
  out = [f"{f} {'added' if f not in before else 'removed' if f not in after else 'changed'}"
         for f in sorted(set(before) | set(after)) if before.get(f) != after.get(f)]
  vb, va = old.get("versions", {}), new.get("versions", {})
  return out + [f"{p} {vb.get(p)} → {va.get(p)}" for p in sorted(set(vb) | set(va))
                if vb.get(p) != va.get(p)]


def write_launch(workdir, family: str, config, units: list) -> str:
  """Writes a new WORKDIR/launches/NNNN-<time>.json, never overwriting one; its path."""
  folder = pathlib.Path(workdir, "launches")
  folder.mkdir(parents=True, exist_ok=True)
  stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
  config = json.loads(config.to_json()) if hasattr(config, "to_json") else dict(config)
  text = json.dumps({"family": family, "config": config, "provenance": _provenance(),
                     "units": [{"id": u.id, "name": u.name, "fields": dict(u.fields),
                                "target_step": u.target_step} for u in units]},
                    indent=1, sort_keys=True, default=str)
  while True:
    file = folder / f"{len(list(folder.glob('*.json'))):04d}-{stamp}.json"
    with contextlib.suppress(FileExistsError), open(file, "x", encoding="utf-8") as f:
      f.write(text)
      return str(file)
    stamp += "x"  # another launch took this name


def read_launches(workdir) -> list[dict]:
  """Every launch of `workdir`, oldest first; ValueError: an unreadable launch file."""
  out = []
  for file in sorted(pathlib.Path(workdir, "launches").glob("*.json")):
    try:
      out.append(json.loads(file.read_text(encoding="utf-8")))
      out[-1]["units"] = [dict(u, id=str(u["id"]), name=str(u["name"]))
                          for u in out[-1]["units"]]
    except (OSError, ValueError, TypeError, KeyError) as e:
      raise ValueError(f"unreadable launch file {file}: {e!r}") from e
  return out


def units(workdir) -> dict[str, Any]:
  """{unit id: `fields.Unit`} of the launches' units, in launch order (the latest target step)."""
  from lie_unitary.experiments import fields
  return {u["id"]: fields.Unit(u["name"], dict(u.get("fields", {})), u.get("target_step"))
          for launch in read_launches(workdir) for u in launch["units"]}


def unit_names(workdir) -> list[str]:
  """The labels of `workdir`'s units ("name", or "name seed=S"), in launch order."""
  return list(dict.fromkeys(u.label for u in units(workdir).values()))


def load_results(workdir, file: str = RESULTS, *, as_frame: bool | None = None) -> Any:
  """The records of WORKDIR/<file> in file order, but the "final" and "curve" records of a
  unit extended to a later target step: its furthest only. `as_frame`: True, a pandas
  DataFrame (NaN where a record lacks a field); False, a list of dicts; None, a DataFrame
  if pandas imports.

  Raises:
    FileNotFoundError: no such workdir or file.
    ValueError: no records of a unit.
    ImportError: as_frame=True without pandas.
  """
  pd, where = None, f"workdir {os.fspath(workdir)!r}"
  if as_frame is not False:  # imported only when a frame may be wanted (~0.3 s, ~30 MiB)
    with contextlib.suppress(ImportError):
      import pandas as pd
  if as_frame and pd is None:
    raise ImportError("load_results(as_frame=True) needs pandas: pip install lie_unitary[pandas]")
  if not os.path.exists(path(workdir, file)):
    raise FileNotFoundError(f"{where} holds no {file}" if os.path.isdir(workdir) else
                            f"no {where}")
  recs = [r for r in read(workdir, file) if "unit" in r]
  if not recs:
    raise ValueError(f"{where}: {file} holds no records of a unit")
  step = lambda r: int(r.get("step", -1))
  furthest = {(r["unit"], r["kind"]): step(r) for r in sorted(recs, key=step)
              if r.get("kind") in ("final", "curve")}
  recs = [r for r in recs if furthest.get((r["unit"], r.get("kind")), step(r)) == step(r)]
  return pd.DataFrame.from_records(recs) if pd is not None else recs


def as_records(results: Any) -> list[dict]:
  """`load_results`' output as a list of dicts (without a DataFrame's NaN of a missing field)."""
  if not hasattr(results, "to_dict"):
    return [dict(r) for r in results]
  return [{str(k): v for k, v in row.items() if not (isinstance(v, float) and v != v)}
          for row in results.to_dict("records")]


@dataclasses.dataclass(frozen=True)
class LoadedUnit:
  """A unit's `id`, `name`, `fields`, its checkpoint's `step` and `state` (nested dicts of
  numpy arrays, a leading replicate axis each: operators {"train": {"params",
  "opt_state"}, "target", "constants", "mask"}, RNNs {"params", "opt_state"}), the
  `config` (JSON) of the latest launch listing it, and whether it is `finished`."""
  id: str
  name: str
  step: int
  state: Any
  fields: dict
  config: dict
  finished: bool


def load_unit(workdir, which: str) -> LoadedUnit:
  """The saved state of a unit, by id, by label ("name seed=S") or by a name one unit has.

  Raises:
    FileNotFoundError: no launch lists that unit, or it has no checkpoint.
    ValueError: a name that several units (seeds) share.
  """
  from lie_unitary.experiments import loop
  known = units(workdir)
  found = [uid for uid, u in known.items() if which in (uid, u.name, u.label)]
  if len(found) > 1:
    by = "id" if len({known[u].label for u in found}) == 1 else "label or id"
    raise ValueError(f"{len(found)} units of {workdir} are called {which!r}: ask for one "
                     f"by {by}: {found}.")
  if not found:
    raise FileNotFoundError(f"no launch in {workdir} lists a unit {which!r}; its units: "
                            f"{unit_names(workdir)}.")
  uid, unit = found[0], known[found[0]]
  with contextlib.closing(loop.checkpoints(path(workdir, "checkpoints", unit.slug))) as manager:
    step = manager.latest_step()
    if step is None:
      raise FileNotFoundError(f"unit {uid!r} has no checkpoint in {manager.directory}.")
    state, _ = loop.restore_checkpoint(manager, step)
  config = next(la["config"] for la in reversed(read_launches(workdir))
                if any(x["id"] == uid for x in la["units"]))
  return LoadedUnit(uid, unit.name, step, state, dict(unit.fields), config,
                    (uid, unit.target_step) in finished_units(workdir))


def _holder(file: str) -> str | None:
  """Who holds claim `file` ("process PID on HOST"); None: no file, a dead pid, stale or unread."""
  try:
    age = time.time() - os.stat(file).st_mtime
    with open(file, encoding="utf-8") as f:
      owner = json.load(f)
  except FileNotFoundError:
    return None
  except (OSError, ValueError):  # being written, or left half-written by a process killed since
    return None if age > STALE_SECONDS else "another process"
  if owner.get("host") == socket.gethostname():
    try:
      os.kill(int(owner.get("pid", 0)), 0)
    except ProcessLookupError:
      return None
    except PermissionError:  # alive, another user's
      pass
  return None if age > STALE_SECONDS else f"process {owner.get('pid')} on {owner.get('host')}"


@contextlib.contextmanager
def claim(workdir, slug: str):
  """Yields None when this process takes unit `slug`, else who computes it (`_holder`: another
  launch or host). WORKDIR/claims/<slug> is created exclusively, refreshed by a heartbeat and
  removed on exit; a dead owner's is taken over."""
  file = path(workdir, "claims", slug)
  os.makedirs(os.path.dirname(file), exist_ok=True)
  with _locked(path(workdir, "claims", ".lock")):  # one process judges a claim at a time
    holder = _holder(file)
    if holder is None:
      with contextlib.suppress(FileNotFoundError):
        os.remove(file)
      try:
        with open(file, "x", encoding="utf-8") as f:
          json.dump({"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}, f)
      except FileExistsError:  # another host's, just now
        holder = "another process"
  if holder is not None:
    yield holder
    return
  try:
    with periodically(HEARTBEAT_SECONDS, lambda: os.utime(file)):
      yield None
  finally:
    with contextlib.suppress(OSError):
      os.remove(file)


@contextlib.contextmanager
def periodically(seconds: float, fn: Callable[[], Any]):
  """Calls `fn` every `seconds` from a thread while the block runs (an OSError skips a call)."""
  done = threading.Event()

  def run():
    while not done.wait(seconds):
      with contextlib.suppress(OSError):
        fn()

  thread = threading.Thread(target=run, daemon=True)
  thread.start()
  try:
    yield
  finally:
    done.set()
    thread.join()
