"""The built wheel holds every subpackage of lie_unitary/ and every config file, so an
installed package can run each experiment family (`runner.FAMILIES`)."""

import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SOURCES = ["pyproject.toml", "setup.py", "README.md", "LICENSE", "lie_unitary", "configs"]


def _source_packages() -> set[str]:
  """Every folder of lie_unitary/ with an __init__.py, as a dotted name, and configs/."""
  found = {".".join(p.parent.relative_to(ROOT).parts)
           for p in (ROOT / "lie_unitary").rglob("__init__.py")}
  return found | {"lie_unitary.configs"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
  if os.environ.get("LIE_UNITARY_WHEEL"):  # CI's, built by `python -m build`
    return zipfile.ZipFile(os.environ["LIE_UNITARY_WHEEL"])
  # Built from a copy of the sources, so the checkout gets no build/ or egg-info folder.
  src = tmp_path_factory.mktemp("src")
  for name in SOURCES:
    path = ROOT / name
    if path.is_dir():
      shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    else:
      shutil.copy(path, src / name)
  out = tmp_path_factory.mktemp("wheel")
  subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out),
                  str(src)], check=True)
  (path,) = out.glob("lie_unitary-*.whl")
  return zipfile.ZipFile(path)


@pytest.mark.slow
def test_the_wheel_holds_every_subpackage(wheel):
  in_wheel = {".".join(pathlib.PurePosixPath(n).parent.parts) for n in wheel.namelist()
              if n.endswith("/__init__.py")}
  assert _source_packages() - in_wheel == set()
  assert {"lie_unitary.experiments.basis", "lie_unitary.experiments.operators",
          "lie_unitary.experiments.rnn"} <= in_wheel


@pytest.mark.slow
def test_the_wheel_holds_every_config_file_and_the_type_marker(wheel):
  names = set(wheel.namelist())
  configs = {f"lie_unitary/configs/{p.name}" for p in (ROOT / "configs").glob("*.py")}
  assert configs - names == set()
  assert "lie_unitary/py.typed" in names
  # The data files the package reads: the published tables, the datasets' mirrors.
  assert {"lie_unitary/experiments/published.json",
          "lie_unitary/experiments/rnn/datasets.json"} <= names


def test_every_family_of_the_runner_is_a_subpackage():
  from lie_unitary.experiments import runner
  for module in runner.FAMILIES.values():
    assert module.rsplit(".", 1)[0] in _source_packages(), module
