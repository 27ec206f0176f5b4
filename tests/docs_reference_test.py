"""Every public name of lie_unitary, lie_unitary.nn and lie_unitary.nnx, and every
experiment family's entry point, has an entry in the API reference (docs/api/)."""

import importlib
import pathlib
import re

import pytest

import lie_unitary as lu
from lie_unitary import nn as lnn
from lie_unitary import nnx as lnnx
from lie_unitary.experiments import runner

API = pathlib.Path(__file__).resolve().parent.parent / "docs" / "api"
_DIRECTIVE = re.compile(r"^\.\. (\w+)::\s*(\S*)")


def reference_entries() -> set[str]:
  """The full names that the reference pages document: autosummary entries (under the
  current module) and autodata/automodule directives."""
  entries = set()
  for page in sorted(API.glob("*.md")):
    module, in_autosummary = None, False
    for line in page.read_text().splitlines():
      directive = _DIRECTIVE.match(line.strip())
      if directive:
        kind, target = directive.groups()
        in_autosummary = kind == "autosummary"
        if kind == "currentmodule":
          module = target
        elif kind == "automodule":
          module = target
          entries.add(target)
        elif kind in ("autodata", "autofunction", "autoclass"):
          entries.add(f"{module}.{target}")
      elif in_autosummary and re.fullmatch(r"\s+[A-Za-z_][\w.]*", line):
        entries.add(f"{module}.{line.strip()}")
      elif line.startswith("```"):
        in_autosummary = False
  return entries


def _resolve(full_name: str):
  parts = full_name.split(".")
  for i in range(len(parts), 0, -1):
    try:
      obj = importlib.import_module(".".join(parts[:i]))
    except ImportError:
      continue
    for part in parts[i:]:
      obj = getattr(obj, part)
    return obj
  raise ImportError(full_name)


@pytest.fixture(scope="module")
def entries() -> dict[str, object]:
  return {name: _resolve(name) for name in reference_entries()}


@pytest.mark.parametrize("module", [lu, lnn, lnnx], ids=lambda m: m.__name__)
def test_every_public_name_has_a_reference_entry(module, entries):
  # An entry documents a name under its own module's path or, for a name re-exported
  # (lu.GURNNCell is lie_unitary.nn.GURNNCell), under the other's: the same object.
  missing = [name for name in module.__all__ if name != "__version__"
             and f"{module.__name__}.{name}" not in entries
             and not any(full.rsplit(".", 1)[-1] == name and obj is getattr(module, name)
                         for full, obj in entries.items())]
  assert missing == [], f"no entry in docs/api/ for {module.__name__}: {missing}"


def test_every_experiment_family_and_the_runner_have_entries(entries):
  from lie_unitary import experiments
  for name in experiments.__all__:
    assert f"lie_unitary.experiments.{name}" in entries, name
  for name in ("train_and_evaluate", "FAMILIES", "get_family"):
    assert f"lie_unitary.experiments.runner.{name}" in entries, name
  assert "lie_unitary.experiments.launch.main" in entries
  for family_module in runner.FAMILIES.values():  # ...experiments.rnn.experiment
    package = family_module.rsplit(".", 1)[0]
    assert package in entries, f"no automodule for the family {package}"
    assert any(name.startswith(family_module + ".") for name in entries), (
        f"no entry point of {family_module} in docs/api/experiments.md")


def test_every_entry_names_an_object_that_exists(entries):
  # _resolve raised already for one that does not; an entry of a private name is a slip.
  private = [name for name in entries if any(p.startswith("_") for p in name.split("."))]
  assert private == []
