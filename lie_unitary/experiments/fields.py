"""Config fields, config files and units of work.

A family's `config.py` lists its fields once, as `Field`s; their defaults type the config,
so ml_collections refuses a value of another type as it is set. `validate` adds, in
one-line errors, what that lets through (None, True for an integer, an unknown field) and
each field's check. A `Unit`'s id hashes every setting that changes what it computes.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import hashlib
import importlib
import json
import math
import os
import re
import runpy
from typing import Any
from typing import Callable
from typing import Iterable
from typing import Mapping

import ml_collections

__all__ = ["ConfigError", "Field", "Unit", "boolean", "config_dir", "config_path", "defaults",
           "fail", "fingerprint", "identity", "integer", "load_config", "load_file",
           "named_configs", "number", "one_of", "registry", "resolved", "sibling", "string",
           "tuple_of", "unknown_field", "validate"]


class ConfigError(ValueError):
  """A config field that does not exist or has a bad value; the message names it."""


# A check: a function of a field's value giving None (accepted) or what it expects.
Check = Callable[[Any], "str | None"]
_NOTHING = object()  # a value every check refuses: `check(_NOTHING)` is what it expects


def _int(v) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def integer(minimum: int = 1) -> Check:
  """Integers ≥ `minimum` (bool excluded)."""
  return lambda v: None if _int(v) and v >= minimum else f"an integer ≥ {minimum}"


def number(minimum: float = 0.0, positive: bool = False, below: float | None = None) -> Check:
  """Finite numbers ≥ `minimum` (> 0 when `positive`; < `below` when given)."""
  words = "a finite number " + ("> 0" if positive else f"≥ {minimum:g}")
  words += "" if below is None else f" and < {below:g}"
  return lambda v: None if ((_int(v) or isinstance(v, float)) and math.isfinite(v)
                            and v >= minimum and (v > 0 or not positive)
                            and (below is None or v < below)) else words


def one_of(choices: Iterable[Any] | Callable[[], Iterable[Any]]) -> Check:
  """One of `choices`, or of `choices()` read when checking (a `registry`)."""
  def check(v):
    options = tuple(choices() if callable(choices) else choices)
    return None if any(v == c and type(v) is type(c) for c in options) else f"one of {options}"
  return check


def registry(module: str, name: str) -> Callable[[], Any]:
  """`module`'s attribute `name`, imported when called (a jax module's choices)."""
  return lambda: getattr(importlib.import_module(module), name)


def boolean(v) -> str | None:
  return None if isinstance(v, bool) else "True or False"


def string(v) -> str | None:
  return None if isinstance(v, str) else "a string"


def tuple_of(item: Check, nonempty: bool = True, unique: bool = False,
             example: str = "") -> Check:
  """A tuple (or list) of values that `item` accepts."""
  def check(v):
    if (isinstance(v, (tuple, list)) and (v or not nonempty) and not any(map(item, v))
        and not (unique and len({repr(x) for x in v}) != len(v))):
      return None
    of = item(_NOTHING).removeprefix("an ").removeprefix("a ").replace("one of", "from")
    return (f"a {'non-empty ' * nonempty}tuple {'' if of.startswith('from') else 'of '}{of}"
            + ", each once" * unique + (f", e.g. {example}" if example else ""))
  return check


_UNSET = object()
# Whether a field enters a unit's identity: always, never, or a rule (config, unit) -> bool.
IdentityRule = bool | Callable[..., bool]


@dataclasses.dataclass(frozen=True)
class Field:
  """One config field: its `default` (and so its type), `help`, a `check` of its value
  (None: the family checks it), whether it enters a unit's `identity` (True, False, or a
  rule `(config, unit) -> bool`) and, for a field added after units were recorded, the
  value `before` that computes what they did: there it stays out of the identity."""
  default: Any
  help: str
  check: Check | None = None
  identity: IdentityRule = True
  before: Any = _UNSET


def defaults(table: Mapping[str, Field]) -> ml_collections.ConfigDict:
  """A fresh config holding every field of `table` at its default."""
  return ml_collections.ConfigDict(copy.deepcopy({n: f.default for n, f in table.items()}))


def fail(field: str, value, expected: str):
  """Raises the one-line ConfigError of a bad field."""
  raise ConfigError(f"config.{field} = {value!r}: expected {expected}.")


def unknown_field(name: str, known: Iterable[str], prefix: str = "") -> ConfigError:
  """The error of a field the config does not have, with the nearest name if one is close."""
  known = sorted(known)
  close = difflib.get_close_matches(name, known, n=1)
  hint = f" (did you mean {prefix + close[0]!r}?)" if close else ""
  return ConfigError(f"config has no field {prefix + name!r}{hint}; the fields are {known}.")


def validate(config, table: Mapping[str, Field], prefix: str = "") -> None:
  """Checks that every field of `config` is in `table`, present and accepted (ConfigError
  naming the first that is not); `prefix`: its path in messages ("models.gurnn.")."""
  for name in config.keys():
    if name not in table:
      raise unknown_field(name, table.keys(), prefix)
  for name, f in table.items():
    if name not in config:
      raise ConfigError(f"config field {prefix + name!r} is missing.")
    expected = f.check and f.check(config[name])
    if expected:
      fail(prefix + name, config[name], expected)


def identity(values, table: Mapping[str, Field], unit=None, config=None) -> dict:
  """{name: value} of the fields of `table` that enter `unit`'s identity: those whose
  rule holds (`Field.identity(config, unit)`, `config` default `values`: a config or a
  unit's spec), but a field at its `before` value."""
  config = values if config is None else config
  out = {}
  for name, f in table.items():
    rule, value = f.identity, values[name]
    if ((rule is True or (callable(rule) and rule(config, unit)))
        and (f.before is _UNSET or value != f.before)):
      out[name] = tuple(value) if isinstance(value, list) else value
  return out


# Config files: one jax-free file per experiment, in configs/ (lie_unitary/configs installed).


def named_configs(family: str) -> tuple[str, ...]:
  """The names of `family`'s config files in configs/."""
  return importlib.import_module(f"lie_unitary.experiments.{family}.config").NAMED_CONFIGS


def config_dir() -> str:
  """The config files' folder: lie_unitary/configs installed, else a checkout's configs/
  (FileNotFoundError: neither, a broken installation)."""
  package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  for folder in (os.path.join(package, "configs"),
                 os.path.join(os.path.dirname(package), "configs")):
    if os.path.isfile(os.path.join(folder, "__init__.py")):
      return folder
  raise FileNotFoundError(f"no configs folder beside {package} (a broken installation?).")


def config_path(family: str, name: str) -> str:
  """The path of `family`'s config file `name` (ValueError: not one of its named configs)."""
  named = named_configs(family)
  if name not in named:
    raise ValueError(f"unknown {family} config {name!r}; expected one of {sorted(named)} "
                     "(or the path of a config file).")
  return os.path.join(config_dir(), name + ".py")


def load_file(file: str) -> ml_collections.ConfigDict:
  """``get_config()`` of the config file at `file` (FileNotFoundError: none)."""
  if not os.path.isfile(file):
    raise FileNotFoundError(f"no config file {file}.")
  return runpy.run_path(file)["get_config"]()


def load_config(family: str, name: str) -> ml_collections.ConfigDict:
  """``get_config()`` of `family`'s named config `name` (`config_path`)."""
  return load_file(config_path(family, name))


def sibling(file: str, name: str) -> ml_collections.ConfigDict:
  """``get_config()`` of config file `name` beside `file` (a config file's ``__file__``):
  how one experiment builds on another, wherever the folder was copied."""
  return load_file(os.path.join(os.path.dirname(os.path.abspath(file)), name + ".py"))


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
  """A 12-hex-digit SHA-256 prefix of the fields as canonical JSON, stable across hosts
  (TypeError: a value that is not JSON-like)."""
  text = json.dumps(_canonical(fields), sort_keys=True, separators=(",", ":"))
  return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def resolved(settings: Mapping[str, Any] = (), **more) -> ml_collections.FrozenConfigDict:
  """A unit's resolved settings (`Unit.spec`), immutable, read by attribute."""
  return ml_collections.FrozenConfigDict({**dict(settings), **more})


@dataclasses.dataclass(frozen=True)
class Unit:
  """One unit of work: what is computed, recorded and resumed as a whole.

  Attributes:
    name: what it computes, e.g. "n=6 lie_algebra epochs=1 lr=0.001" (its seeds' too).
    fields: every setting that changes the computation, its seed among them (JSON-like).
    target_step: the step at which it is finished.
    cost: its weight in the launch's ETA.
    spec: every setting it computes with (`resolved`), read as `unit.spec.n`.
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
  def label(self) -> str:
    """`name` and its seed, for progress lines: "permuted T=784 gurnn seed=1"."""
    seed = self.fields.get("seed")
    return self.name if seed is None else f"{self.name} seed={seed}"

  @property
  def slug(self) -> str:
    """`id` as a file name (checkpoint folders, claims)."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.id)
