"""Units of work and their identity: what makes a stored result reusable.

A unit is the smallest piece of an experiment that is computed, recorded and
resumed as a whole (operators: every replicate of one (n, approach, epochs,
learning rate, basis scale); RNNs: every replicate of one (task, model, T)). Its
identity is a stable hash of ``fields``: EVERY setting that changes what the unit
computes (seed, data sizes, noise, learning rates, model sizes, dtype, ...). Records
and checkpoints carry that hash, so a rerun with any changed field computes a new
unit beside the old one, and nothing is reused unless it was computed with the
same fields.

Fields that only say where a trajectory stops (the RNN's number of updates) are
not part of the identity: the records up to that point are the same whatever the
stopping point, so a run can be extended. `target_step` holds it instead.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from typing import Any
from typing import Mapping

__all__ = ["Unit", "canonical_json", "fingerprint"]


def _canonical(value: Any) -> Any:
  if hasattr(value, "tolist"):  # numpy scalars and arrays
    value = value.tolist()
  if isinstance(value, Mapping):
    return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
  if isinstance(value, (list, tuple)):
    return [_canonical(v) for v in value]
  if isinstance(value, bool) or value is None or isinstance(value, str):
    return value
  if isinstance(value, int):
    return int(value)
  if isinstance(value, float):
    if not math.isfinite(value):
      return repr(value)
    # 1 and 1.0 are the same setting: integral floats hash as ints.
    return int(value) if value.is_integer() else float(repr(value))
  raise TypeError(f"unit fields must be JSON-like (numbers, strings, lists, dicts); got "
                  f"{type(value).__name__}: {value!r}.")


def canonical_json(fields: Mapping[str, Any]) -> str:
  """Fields as JSON with sorted keys, tuples as lists and integral floats as ints.

  Raises:
    TypeError: for a value that is not JSON-like.
  """
  return json.dumps(_canonical(fields), sort_keys=True, separators=(",", ":"))


def fingerprint(fields: Mapping[str, Any]) -> str:
  """A 12-hex-digit SHA-256 prefix of `canonical_json(fields)`: stable across runs,
  processes, machines and Python versions."""
  return hashlib.sha256(canonical_json(fields).encode("utf-8")).hexdigest()[:12]


@dataclasses.dataclass(frozen=True)
class Unit:
  """One unit of work.

  Attributes:
    name: a short human label, e.g. "n=6 lie_algebra epochs=1 lr=0.001"; units of
      one launch have distinct names.
    fields: every setting that changes the computation (JSON-like); hashed into `id`
      and written into every record of the unit.
    target_step: the step at which the unit is finished (the number of training
      steps or updates).
    cost: relative cost, to start the longest units first when worker processes
      share them.
    spec: the family's own description of the unit (not hashed; derived from the
      same config as `fields`).
  """
  name: str
  fields: Mapping[str, Any]
  target_step: int
  cost: float = 1.0
  spec: Any = None

  @property
  def id(self) -> str:
    """`name` and the fields' fingerprint: "n=6 lie_algebra ...-3fa9c2d1e0b4"."""
    return f"{self.name}-{fingerprint(self.fields)}"

  @property
  def slug(self) -> str:
    """`id` as a file name (checkpoint folders, claim files)."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.id)
