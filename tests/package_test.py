"""The package's public surface: the core stands alone, `__all__` is whole and sorted,
and the README's checkout does not shadow the package."""

import os
import re
import subprocess
import sys

import pytest

import lie_unitary as lu
from lie_unitary import experiments
from lie_unitary import nn as lnn


def _loaded_after(imports: str, prefix: str) -> str:
  """The modules starting with `prefix` that a fresh interpreter holds after `imports`."""
  code = (f"import sys, {imports}; "
          f"print(sorted(m for m in sys.modules if m.startswith({prefix!r})))")
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        check=True).stdout.strip()


@pytest.mark.slow
def test_importing_the_core_loads_no_experiment_module():
  assert _loaded_after("lie_unitary, lie_unitary.nn", "lie_unitary.experiments") == "[]"


@pytest.mark.slow
def test_importing_the_package_loads_no_pallas_module():
  # The recurrences are lax.scan loops: nothing needs Pallas' API or its Triton backend.
  # (flax itself loads some of jax._src.pallas; that is not the package's to avoid.)
  assert _loaded_after("lie_unitary, lie_unitary.nn, lie_unitary.experiments.rnn.experiment",
                       "jax.experimental.pallas") == "[]"


@pytest.mark.parametrize("module", [lu, lnn, experiments])
def test_all_names_exist_and_are_sorted(module):
  assert module.__all__ == sorted(module.__all__)
  for name in module.__all__:
    assert getattr(module, name) is not None, name


def test_an_unknown_attribute_raises_attribute_error():
  with pytest.raises(AttributeError, match="no_such_name"):
    lu.no_such_name


def test_the_readme_clones_into_a_folder_not_named_like_the_package():
  # A checkout folder named lie_unitary, with Python started from its parent, is
  # imported as a namespace package in place of the (editable) installed one.
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
    readme = f.read()
  clone = re.search(r"git clone \S+ URL> (\S+) && cd (\S+)", readme) or re.search(
      r"git clone \S+ (\S+) && cd (\S+)", readme)
  assert clone, "the README's quickstart has no 'git clone URL FOLDER && cd FOLDER'"
  assert clone.group(1) == clone.group(2) != "lie_unitary"
