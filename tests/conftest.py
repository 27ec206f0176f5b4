"""Shared fixtures: float64 on request, strict rank promotion, fast compiles, a
compilation cache shared with subprocesses.

Every test runs with HIGHEST default matmul precision, so that the tests' own reference
products (UᴴU, dense compositions, Padé expm) are exact on GPU/TPU too, where the
default float32 precision is reduced (TF32). The library sets its own precision.

The suite is compile-bound (small programs, each run a few times), so the tests compile
cheaply; the results agree within the tests' tolerances (the golden tests included):

- XLA skips most optimisations (`jax_disable_most_optimizations`), in the tests and in
  the subprocesses they start (launchers compared with in-process runs).
- XLA's CPU backend emits fusions with its LLVM IR emitters instead of the MLIR fusion
  emitters, which took about twice the compile time on the same programs (jaxlib
  0.8-0.10), here and in the subprocesses (XLA_FLAGS). The notebooks that train for most
  of their run take XLA's defaults back: the LLVM IR emitters ran a notebook's
  optimised training about 3x slower (215 s against 70 s).
  If a jaxlib ever drops the flag, XLA refuses to start on it: delete the flag here.
"""

import os

import jax
import pytest

_FAST_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):  # else yours
  os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_EMITTERS}".strip()
os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "true"   # for subprocesses
# One pytest worker per core (pyproject.toml): on a GPU they share its memory.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
jax.config.update("jax_disable_most_optimizations", True)


@pytest.fixture(autouse=True, scope="session")
def _shared_compilation_cache(tmp_path_factory):
  """One persistent compilation cache for the session and the subprocesses it starts.

  Many tests compile the same smoke-size programs; the cache compiles each once for
  the pytest workers and the launchers they start (they share the XLA flags above). It
  lies beside pytest's temp folder (a worker's is inside it), so a fresh --basetemp
  starts with an empty cache.
  """
  base = tmp_path_factory.getbasetemp()
  if os.environ.get("PYTEST_XDIST_WORKER"):  # BASETEMP/popen-gwN
    base = base.parent
  cache = str(base.parent / "jax_compilation_cache")
  jax.config.update("jax_compilation_cache_dir", cache)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  os.environ["JAX_COMPILATION_CACHE_DIR"] = cache
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  yield


@pytest.fixture(autouse=True, scope="session")
def _exact_reference_matmuls():
  with jax.default_matmul_precision("highest"):
    yield


@pytest.fixture
def x64():
  """Runs a test with float64/complex128 enabled."""
  with jax.enable_x64(True):
    yield


@pytest.fixture
def strict_rank_promotion():
  """Makes implicit rank promotion an error, so broadcasting bugs cannot hide."""
  with jax.numpy_rank_promotion("raise"):
    yield


@pytest.fixture(scope="module")
def fast_compiles():
  """Kept for the modules that name it: the whole session compiles this way (above)."""
  yield


def pytest_collection_modifyitems(config, items):
  """Files with more end-to-end (slow) tests first, then (the quick tier's order) files
  with more quick tests: each pytest-xdist worker takes whole files in this order
  (`--no-loadscope-reorder`), and a long file taken last leaves the other worker idle."""
  slow, quick = {}, {}
  for item in items:
    marked = bool(item.get_closest_marker("slow"))
    slow[item.path] = slow.get(item.path, 0) + marked
    quick[item.path] = quick.get(item.path, 0) + (not marked)
  items.sort(key=lambda item: (-slow[item.path], -quick[item.path]))
