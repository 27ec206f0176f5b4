"""Config field tables and units of work: what a field accepts, and what a result is.

A family's `config.py` lists its fields as `Field`s (defaults live in its jax-free
`defaults.py`): what each accepts (a `Check`, with the words for the error) and whether it
enters a unit's identity. From the table come `validate` (unknown, missing and bad fields,
each named in one line) and `identity`.

A `Unit` is the smallest piece of an experiment that is computed, recorded and resumed as
a whole. Its id hashes every setting that changes what it computes, so a changed field
gives a new unit and nothing is reused across settings; its `target_step` is not part of
it, so a run can be extended.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
import re
from typing import Any
from typing import Callable
from typing import Iterable
from typing import Mapping

import numpy as np

__all__ = ["Check", "ConfigError", "Field", "Unit", "boolean", "fail", "fingerprint", "identity",
           "integer", "number", "one_of", "pairs", "string", "tuple_of", "validate"]


class ConfigError(ValueError):
  """A config field that does not exist or has a bad value; the message names it."""


@dataclasses.dataclass(frozen=True)
class Check:
  """A test of a field's value and the words of what it accepts.

  Attributes:
    accepts: value -> bool.
    expected: what it accepts, e.g. "an integer ≥ 1" (for the error message).
  """
  accepts: Callable[[Any], bool]
  expected: str

  def __call__(self, value) -> bool:
    try:
      return bool(self.accepts(value))
    except (TypeError, ValueError):
      return False


def _is_int(v) -> bool:
  return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_number(v) -> bool:
  return (isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)
          and math.isfinite(v))


def integer(minimum: int = 1) -> Check:
  """Integers ≥ `minimum` (bool excluded)."""
  return Check(lambda v: _is_int(v) and v >= minimum, f"an integer ≥ {minimum}")


def number(minimum: float = 0.0, positive: bool = False, below: float | None = None) -> Check:
  """Finite numbers ≥ `minimum` (> 0 when `positive`; < `below` when given)."""
  words = "a finite number " + ("> 0" if positive else f"≥ {minimum:g}")
  if below is not None:
    words += f" and < {below:g}"
  return Check(lambda v: _is_number(v) and v >= minimum and (not positive or v > 0)
               and (below is None or v < below), words)


def one_of(choices: Iterable[Any]) -> Check:
  """One of `choices` (derived from a registry where there is one)."""
  choices = tuple(choices)
  return Check(lambda v: any(v == c and type(v) is type(c) for c in choices),
               f"one of {choices}")


def boolean() -> Check:
  return Check(lambda v: isinstance(v, bool), "True or False")


def string() -> Check:
  return Check(lambda v: isinstance(v, str), "a string")


def tuple_of(item: Check, nonempty: bool = True, unique: bool = False,
             example: str = "") -> Check:
  """A tuple (or list) of values that `item` accepts."""
  def accepts(v):
    if not isinstance(v, (tuple, list)) or (nonempty and not v):
      return False
    if unique and len({repr(x) for x in v}) != len(v):
      return False
    return all(item(x) for x in v)
  words = (f"a {'non-empty ' if nonempty else ''}tuple of {item.expected.removeprefix('an ')}"
           .replace("tuple of a ", "tuple of ").replace("tuple of one of", "tuple from"))
  if unique:
    words += ", each once"
  return Check(accepts, words + (f", e.g. {example}" if example else ""))


def pairs(first: Check, second: Check, example: str) -> Check:
  """A non-empty tuple of pairs (a, b) with `first(a)` and `second(b)`."""
  def accepts(v):
    return (isinstance(v, (tuple, list)) and bool(v)
            and all(isinstance(p, (tuple, list)) and len(p) == 2 and first(p[0])
                    and second(p[1]) for p in v))
  return Check(accepts, f"a non-empty tuple of pairs ({first.expected}, {second.expected}), "
               f"e.g. {example}")


# Whether a field enters a unit's identity: always, never, or a rule of the unit.
IdentityRule = bool | Callable[..., bool]


@dataclasses.dataclass(frozen=True)
class Field:
  """One config field's rules (its default and meaning: the family's defaults.py).

  Attributes:
    check: what values it accepts (None: the family checks it, e.g. a nested table).
    identity: whether it enters a unit's identity: True (every unit), False (it only
      says what to run or where to stop), or a rule `(config, unit spec) -> bool`.
  """
  check: Check | None
  identity: IdentityRule = True


def fail(field: str, value, expected: str):
  """Raises the one-line ConfigError of a bad field."""
  raise ConfigError(f"config.{field} = {value!r}: expected {expected}.")


def _unknown(name: str, known: Iterable[str], prefix: str) -> ConfigError:
  known = sorted(known)
  close = difflib.get_close_matches(name, known, n=1)
  hint = f" (did you mean {prefix + close[0]!r}?)" if close else ""
  return ConfigError(f"config has no field {prefix + name!r}{hint}; the fields are {known}.")


def validate(config, table: Mapping[str, Field], prefix: str = "",
             skip: Iterable[str] = ()) -> None:
  """Checks a config against a field table: every field known, present and accepted.

  Args:
    config: a ConfigDict (or mapping).
    table: the field table.
    prefix: the config path of `config` within the whole (for messages), e.g. "models.gurnn.".
    skip: fields whose values the family checks itself (nested tables of its own shape).

  Raises:
    ConfigError: naming the first unknown, missing or bad field and what it may be.
  """
  for name in config.keys():
    if name not in table:
      raise _unknown(name, table.keys(), prefix)
  for name, f in table.items():
    if name not in config:
      raise ConfigError(f"config field {prefix + name!r} is missing.")
    if name in skip or f.check is None:
      continue
    if not f.check(config[name]):
      fail(prefix + name, config[name], f.check.expected)


def identity(config, table: Mapping[str, Field], unit) -> dict:
  """The fields of `table` that enter the identity of `unit` (see `Field.identity`)."""
  out = {}
  for name, f in table.items():
    rule = f.identity
    if rule is True or (callable(rule) and rule(config, unit)):
      value = config[name]
      out[name] = tuple(value) if isinstance(value, list) else value
  return out


# Units ------------------------------------------------------------------------------------


def _canonical(value: Any) -> Any:
  if hasattr(value, "tolist"):
    value = value.tolist()
  if isinstance(value, Mapping):
    return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
  if isinstance(value, (list, tuple)):
    return [_canonical(v) for v in value]
  if isinstance(value, (bool, str)) or value is None:
    return value
  if isinstance(value, int):
    return int(value)
  if isinstance(value, float):
    if not math.isfinite(value):
      return repr(value)
    return int(value) if value.is_integer() else float(repr(value))  # 1 and 1.0: one setting
  raise TypeError(f"unit fields must be JSON-like (numbers, strings, lists, dicts); got "
                  f"{type(value).__name__}: {value!r}.")


def fingerprint(fields: Mapping[str, Any]) -> str:
  """A 12-hex-digit SHA-256 prefix of the fields as canonical JSON (sorted keys, tuples
  as lists, integral floats as ints): stable across processes, hosts and Pythons.

  Raises:
    TypeError: a value that is not JSON-like.
  """
  text = json.dumps(_canonical(fields), sort_keys=True, separators=(",", ":"))
  return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


@dataclasses.dataclass(frozen=True)
class Unit:
  """One unit of work.

  Attributes:
    name: a short label, e.g. "n=6 lie_algebra epochs=1 lr=0.001" (distinct within a
      launch).
    fields: every setting that changes the computation (JSON-like): hashed into `id`
      and written into each of the unit's records.
    target_step: the step at which the unit is finished.
    cost: relative cost, the unit's weight in the launch's ETA.
    spec: the family's own description of the unit (derived from the same config).
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
    """`id` as a file name (checkpoint folders, claims)."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.id)
