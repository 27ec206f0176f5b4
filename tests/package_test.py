"""The package's public surface: the core stands alone, `__all__` is whole and sorted,
moved names keep a deprecation path."""

import subprocess
import sys

import pytest

import lie_unitary as lu
from lie_unitary import experiments
from lie_unitary import nn as lnn
from lie_unitary.experiments.rnn import data as tasks


@pytest.mark.slow
def test_importing_the_core_loads_no_experiment_module():
  code = ("import sys, lie_unitary, lie_unitary.nn; "
          "print(sorted(m for m in sys.modules if m.startswith('lie_unitary.experiments')))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True).stdout
  assert out.strip() == "[]"


@pytest.mark.slow
def test_importing_the_package_loads_no_pallas_module():
  # The recurrences are lax.scan loops: nothing needs Pallas' API or its Triton backend.
  # (flax itself loads some of jax._src.pallas; that is not the package's to avoid.)
  code = ("import sys, lie_unitary, lie_unitary.nn, lie_unitary.experiments.rnn.trainer; "
          "print(sorted(m for m in sys.modules if m.startswith('jax.experimental.pallas')))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=True).stdout
  assert out.strip() == "[]"


@pytest.mark.parametrize("module", [lu, lnn, experiments])
def test_all_names_exist_and_are_sorted(module):
  assert module.__all__ == sorted(module.__all__)
  for name in module.__all__:
    assert getattr(module, name) is not None, name


@pytest.mark.parametrize("name", ["adding_batch", "memory_batch"])
def test_moved_task_generators_warn_and_still_work(name):
  with pytest.warns(DeprecationWarning, match=f"experiments.rnn.data.{name}"):
    fn = getattr(lu, name)
  assert fn is getattr(tasks, name)


def test_an_unknown_attribute_raises_attribute_error():
  with pytest.raises(AttributeError, match="no_such_name"):
    lu.no_such_name
