"""Shared fixtures: float64 on request, strict rank promotion, compile-bound modules.

Every test runs with HIGHEST default matmul precision, so that the tests' own reference
products (UᴴU, dense compositions, Padé expm) are exact on GPU/TPU too, where the
default float32 precision is reduced (TF32). The library sets its own precision.
"""

import jax
import pytest


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
