"""The experiments' config files (the repository's ``configs/`` folder), found and loaded.

Each experiment is one small Python file whose ``get_config()`` starts from its
family's defaults and sets that experiment's fields: the file a user copies to write
their own. They live in ``configs/`` at the repository's root, and an installed
package carries them as ``lie_unitary/configs/`` (pyproject.toml maps the folder), so
``--config=table1`` works from a checkout and from an installed wheel alike.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Mapping

import ml_collections

__all__ = ["config_dir", "load", "load_file", "path", "sibling"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # lie_unitary/


def config_dir() -> str:
  """The folder of the config files: the installed package's ``lie_unitary/configs``,
  else the checkout's ``configs/`` beside the package."""
  for folder in (os.path.join(_PACKAGE, "configs"),
                 os.path.join(os.path.dirname(_PACKAGE), "configs")):
    if os.path.isfile(os.path.join(folder, "__init__.py")):
      return folder
  raise FileNotFoundError(f"no configs folder beside {_PACKAGE} (a broken installation?).")


def path(named: Mapping[str, str], name: str, family: str) -> str:
  """The path of the config file a family calls `name`.

  Raises:
    ValueError: `name` is not one of the family's `named` configs.
  """
  if name not in named:
    raise ValueError(f"unknown {family} config {name!r}; expected one of {sorted(named)} "
                     "(or the path of a config file).")
  return os.path.join(config_dir(), named[name] + ".py")


def load_file(file: str) -> ml_collections.ConfigDict:
  """`get_config()` of the config file at `file`.

  Raises:
    FileNotFoundError: no such file.
  """
  if not os.path.isfile(file):
    raise FileNotFoundError(f"no config file {file}.")
  name = os.path.splitext(os.path.basename(file))[0]
  spec = importlib.util.spec_from_file_location(f"_lie_unitary_config_{name}", file)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config()


def load(named: Mapping[str, str], name: str, family: str) -> ml_collections.ConfigDict:
  """`get_config()` of the family's config file `name` (see `path`)."""
  return load_file(path(named, name, family))


def sibling(file: str, name: str) -> ml_collections.ConfigDict:
  """`get_config()` of config file `name` in the folder of `file` (a config file's own
  ``__file__``): how one experiment builds on another, wherever the folder was copied."""
  return load_file(os.path.join(os.path.dirname(os.path.abspath(file)), name + ".py"))
