"""Shared fixtures: float64 on request, strict rank promotion, compile-bound modules,
a compilation cache shared with subprocesses.

Every test runs with HIGHEST default matmul precision, so that the tests' own reference
products (UᴴU, dense compositions, Padé expm) are exact on GPU/TPU too, where the
default float32 precision is reduced (TF32). The library sets its own precision.
"""

import os

import jax
import pytest


@pytest.fixture(autouse=True, scope="session")
def _shared_compilation_cache(tmp_path_factory):
  """One persistent compilation cache for the session and the subprocesses it starts.

  Many tests compile the same smoke-size programs (in process and in the launcher
  subprocesses); the cache compiles each once. Subprocesses also skip most XLA
  optimisations, like the in-process `fast_compiles` modules they are compared with.
  """
  cache = str(tmp_path_factory.getbasetemp().parent / "jax_compilation_cache")
  jax.config.update("jax_compilation_cache_dir", cache)
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
  os.environ["JAX_COMPILATION_CACHE_DIR"] = cache
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"] = "true"
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
  """For compile-bound modules: XLA skips most optimisations (results do not change)."""
  previous = jax.config.read("jax_disable_most_optimizations")
  jax.config.update("jax_disable_most_optimizations", True)
  yield
  jax.config.update("jax_disable_most_optimizations", previous)
