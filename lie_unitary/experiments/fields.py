"""Config fields, config files and units of work.

A family lists its fields once, as `Field`s: their defaults type the config (ml_collections
refuses other types); `validate` refuses in one line what typing lets through."""

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


class ConfigError(ValueError):
  """A config field that does not exist or has a bad value; the message names it."""


Check = Callable[[Any], "str | None"]  # a field's value -> None (accepted) or what it expects
_NOTHING = object()  # every check refuses it (`check(_NOTHING)`: what it expects); unset


def integer(minimum: int = 1) -> Check:
  """Integers ≥ `minimum` (bool excluded)."""
  return lambda v: (None if isinstance(v, int) and not isinstance(v, bool) and v >= minimum
                    else f"an integer ≥ {minimum}")


def number(minimum: float = 0.0, positive: bool = False, below: float | None = None) -> Check:
  """Finite numbers ≥ `minimum` (> 0 when `positive`; < `below` when given)."""
  words = "a finite number " + ("> 0" if positive else f"≥ {minimum:g}")
  words += "" if below is None else f" and < {below:g}"
  return lambda v: None if (isinstance(v, (int, float)) and not isinstance(v, bool)
                            and math.isfinite(v) and v >= minimum and (v > 0 or not positive)
                            and (below is None or v < below)) else words


def one_of(choices: Iterable[Any] | Callable[[], Iterable[Any]]) -> Check:
  """One of `choices` (or of `choices()`, a `registry`)."""
  def check(v):
    options = tuple(choices() if callable(choices) else choices)
    return None if any(v == c and type(v) is type(c) for c in options) else f"one of {options}"
  return check


def registry(module: str, name: str) -> Callable[[], Any]:
  """`module`'s attribute `name`, imported when called."""
  return lambda: getattr(importlib.import_module(module), name)


def boolean(v) -> str | None:
  return None if isinstance(v, bool) else "True or False"


def string(v) -> str | None:
  return None if isinstance(v, str) else "a string"


def tuple_of(item: Check, nonempty: bool = True, unique: bool = False, example: str = "") -> Check:
  """A tuple (or list) of values that `item` accepts."""
  def check(v):
    if (isinstance(v, (tuple, list)) and (v or not nonempty) and not any(map(item, v))
        and not (unique and len({repr(x) for x in v}) != len(v))):
      return None
    of = item(_NOTHING).removeprefix("an ").removeprefix("a ").replace("one of", "from")
    return (f"a {'non-empty ' * nonempty}tuple {'' if of.startswith('from') else 'of '}{of}"
            + ", each once" * unique + (f", e.g. {example}" if example else ""))
  return check


@dataclasses.dataclass(frozen=True)
class Field:
  """A config field: `default` (its type), `help`, `check` (None: the family's), whether it
  enters a unit's `identity` (or a rule `(config, unit) -> bool`), and `before`: a value
  that computes what units recorded before the field did (there it stays out of the id)."""
  default: Any
  help: str
  check: Check | None = None
  identity: bool | Callable[..., bool] = True
  before: Any = _NOTHING


def defaults(table: Mapping[str, Field]) -> ml_collections.ConfigDict:
  """A fresh config of `table`'s defaults."""
  return ml_collections.ConfigDict(copy.deepcopy({n: f.default for n, f in table.items()}))


def fail(field: str, value, expected: str):
  """Raises the one-line ConfigError of a bad field."""
  raise ConfigError(f"config.{field} = {value!r}: expected {expected}.")


def unknown_field(name: str, known: Iterable[str], prefix: str = "") -> ConfigError:
  """The error of a field the config lacks, naming the nearest if one is close."""
  known = sorted(known)
  close = difflib.get_close_matches(name, known, n=1)
  hint = f" (did you mean {prefix + close[0]!r}?)" if close else ""
  return ConfigError(f"config has no field {prefix + name!r}{hint}; the fields are {known}.")


def validate(config, table: Mapping[str, Field], prefix: str = "") -> None:
  """ConfigError naming the first field of `config` not in `table`, missing or refused;
  `prefix`: its path in messages ("models.gurnn.")."""
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
  """{name: value} of `table`'s fields in `unit`'s identity (`Field.identity`, `config`
  default `values`), less those at their `before` value."""
  config = values if config is None else config
  enters = lambda f: f.identity is True or (callable(f.identity) and f.identity(config, unit))
  return {name: tuple(values[name]) if isinstance(values[name], list) else values[name]
          for name, f in table.items()
          if enters(f) and (f.before is _NOTHING or values[name] != f.before)}


def named_configs(family: str) -> tuple[str, ...]:
  """The names of `family`'s config files in configs/."""
  return importlib.import_module(f"lie_unitary.experiments.{family}.config").NAMED_CONFIGS


def config_dir() -> str:
  """The config files' folder: lie_unitary/configs installed, else a checkout's configs/."""
  package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  inside = os.path.join(package, "configs")
  return inside if os.path.isdir(inside) else os.path.join(os.path.dirname(package), "configs")


def config_path(family: str, name: str) -> str:
  """The path of `family`'s config file `name` (ValueError: no such name)."""
  named = sorted(named_configs(family))
  if name not in named:
    raise ValueError(f"unknown {family} config {name!r}; expected one of {named} or a path.")
  return os.path.join(config_dir(), name + ".py")


def load_file(file: str) -> ml_collections.ConfigDict:
  """``get_config()`` of the config file at `file` (FileNotFoundError: none)."""
  return runpy.run_path(file)["get_config"]()


def load_config(family: str, name: str) -> ml_collections.ConfigDict:
  """``get_config()`` of `family`'s named config `name`."""
  return load_file(config_path(family, name))


def sibling(file: str, name: str) -> ml_collections.ConfigDict:
  """``get_config()`` of config file `name` beside `file` (a config file's ``__file__``)."""
  return load_file(os.path.join(os.path.dirname(os.path.abspath(file)), name + ".py"))


def _canonical(value: Any) -> Any:
  value = value.tolist() if hasattr(value, "tolist") else value
  if isinstance(value, Mapping):  # its keys sorted by `json.dumps`
    return {str(k): _canonical(v) for k, v in value.items()}
  if isinstance(value, (list, tuple)):
    return [_canonical(v) for v in value]
  if isinstance(value, float) and not math.isfinite(value):
    return repr(value)
  if isinstance(value, float) and value.is_integer():
    return int(value)  # 1 and 1.0: one setting
  if value is None or isinstance(value, (bool, str, int, float)):
    return value
  raise TypeError(f"unit fields must be JSON-like (numbers, strings, lists, dicts); got "
                  f"{type(value).__name__}: {value!r}.")


def fingerprint(fields: Mapping[str, Any]) -> str:
  """12 hex digits of the SHA-256 of the fields' canonical JSON (TypeError: not JSON-like)."""
  text = json.dumps(_canonical(fields), sort_keys=True, separators=(",", ":"))
  return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def resolved(settings: Mapping[str, Any] = (), **more) -> ml_collections.FrozenConfigDict:
  """A unit's resolved settings (`Unit.spec`), immutable."""
  return ml_collections.FrozenConfigDict({**dict(settings), **more})


@dataclasses.dataclass(frozen=True)
class Unit:
  """What is computed, recorded and resumed as a whole: `fields` (every setting that changes
  the computation, seed too), `cost` (its weight in the ETA), `spec` (`resolved`)."""
  name: str
  fields: Mapping[str, Any]
  target_step: int
  cost: float = 1.0
  spec: Any = None

  @property
  def id(self) -> str:
    """`name`-`fingerprint(fields)`."""
    return f"{self.name}-{fingerprint(self.fields)}"

  @property
  def label(self) -> str:
    """`name` and its seed, for progress lines."""
    seed = self.fields.get("seed")
    return self.name if seed is None else f"{self.name} seed={seed}"

  @property
  def slug(self) -> str:
    """`id` as a file name."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.id)
