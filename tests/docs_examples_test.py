"""The Python examples of README.md and the guides (docs/*.md) run as written, so an
example that drifts from the API fails.

Each ```python block runs in order, the blocks of one page in one namespace (a page's
later example may use an earlier one's names), from a temporary working directory. A
block preceded by a line `<!-- not run: REASON -->` is skipped (an example that needs a
dataset, a GPU or minutes of training); the reason is reported. Deselected by default
(pyproject.toml): `python -m pytest tests -m docs` runs them, as CI's docs step does."""

import os
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)
_NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")


def python_blocks(page: pathlib.Path) -> list[tuple[int, str, str | None]]:
  """(line, source, reason not run or None) of each ```python block of a page."""
  text = page.read_text()
  blocks = []
  for match in _FENCE.finditer(text):
    before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
    skip = _NOT_RUN.search(before)
    blocks.append((text.count("\n", 0, match.start()) + 1, match.group(1),
                   skip.group(1) if skip else None))
  return blocks


@pytest.mark.slow
@pytest.mark.docs
@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_the_pages_python_examples_run(page, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  namespace = {"__name__": "__docs_example__"}
  ran = 0
  for line, source, not_run in python_blocks(page):
    if not_run:
      print(f"{page.name}:{line}: not run ({not_run})")
      continue
    code = compile(source, f"{page.relative_to(ROOT)}:{line}", "exec")
    exec(code, namespace)  # noqa: S102
    ran += 1
  assert ran or all(reason for _, _, reason in python_blocks(page))


def test_every_page_with_examples_is_collected():
  names = {p.name for p in PAGES if python_blocks(p)}
  assert "README.md" in names and "nn.md" in names, names
  assert os.path.isdir(ROOT / "docs")
