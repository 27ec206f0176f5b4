r"""Executes the notebooks top to bottom and saves them with their outputs.

  python scripts/run_notebooks.py                       # every notebooks/*.ipynb, in place
  python scripts/run_notebooks.py notebooks/unitary_rnn.ipynb --out_dir=/tmp/nb

Each runs in a fresh kernel from notebooks/; a cell that raises stops it and nothing is
written. Needs the `notebooks` extra: `pip install -e '.[notebooks]'`.
"""

import os
import pathlib
import sys
import time

from absl import app
from absl import flags

_OUT_DIR = flags.DEFINE_string("out_dir", None, "Write executed notebooks here, not in place.")
_TIMEOUT = flags.DEFINE_integer("timeout", 600, "Seconds allowed per cell.")

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"


def execute(path: pathlib.Path, timeout: int = 600):
  """Runs the notebook at `path` in a fresh kernel; returns (executed notebook, seconds).

  Raises:
    nbclient.exceptions.CellExecutionError: a cell raised; the message has its traceback.
    FileNotFoundError: no file at `path`.
  """
  import nbclient  # the `notebooks` extra; imported here so --help works without it
  import nbformat

  notebook = nbformat.read(path, as_version=4)
  start = time.perf_counter()
  # OPENBLAS_NUM_THREADS=1 reaches the kernel through the environment (docs/cpu_notes.md).
  os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
  nbclient.NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                          record_timing=False,
                          resources={"metadata": {"path": str(path.parent)}}).execute()
  return notebook, time.perf_counter() - start


def main(argv):
  import nbformat

  paths = [pathlib.Path(a).resolve() for a in argv[1:]] or sorted(NOTEBOOKS.glob("*.ipynb"))
  if not paths:
    sys.exit(f"no notebooks found in {NOTEBOOKS}")
  for path in paths:
    notebook, seconds = execute(path, _TIMEOUT.value)
    target = pathlib.Path(_OUT_DIR.value) / path.name if _OUT_DIR.value else path
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, target)
    print(f"{path.name}: {seconds:.0f} s, {target.stat().st_size / 1024:.0f} KiB -> {target}",
          flush=True)


if __name__ == "__main__":
  app.run(main)
