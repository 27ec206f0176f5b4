"""Shared fixtures: float64 on request, and strict rank promotion for library tests."""

import jax
import pytest


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
