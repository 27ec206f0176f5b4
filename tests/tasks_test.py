"""Tests of the adding and memory problems against their definitions (paper §4)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary.experiments.rnn import data as tasks

# Compile-bound: measured cold, 2 cores, 22 s -> 13 s with most XLA optimisations skipped.
pytestmark = pytest.mark.usefixtures("fast_compiles")


@pytest.mark.parametrize("T", [2, 7, 100])
def test_adding_markers_and_targets(T):
  x, y = jax.jit(tasks.adding_batch, static_argnums=(1, 2))(jax.random.key(T), 500, T)
  x, y = np.asarray(x), np.asarray(y)
  assert x.shape == (500, T, 2) and y.shape == (500,)
  assert x.dtype == np.float32 and y.dtype == np.float32
  markers = x[..., 1]
  assert set(np.unique(markers)) <= {0.0, 1.0}
  half = T // 2
  np.testing.assert_array_equal(markers[:, :half].sum(1), 1)   # one marker in [0, T/2)
  np.testing.assert_array_equal(markers[:, half:].sum(1), 1)   # one in [T/2, T)
  values = x[..., 0]
  assert values.min() >= 0 and values.max() < 1
  first = markers[:, :half].argmax(1)
  second = half + markers[:, half:].argmax(1)
  rows = np.arange(500)
  np.testing.assert_allclose(y, values[rows, first] + values[rows, second], rtol=1e-6)


def test_adding_marker_positions_cover_both_halves():
  T = 10
  x, _ = tasks.adding_batch(jax.random.key(0), 4000, T)
  counts = np.asarray(x[..., 1]).sum(0)
  assert np.all(counts > 0)  # every position gets a marker sometimes
  np.testing.assert_allclose(counts[: T // 2].sum(), 4000)


def test_adding_baseline_by_monte_carlo():
  _, y = tasks.adding_batch(jax.random.key(1), 200_000, 4)
  mc = float(tasks.adding_loss(jnp.ones_like(y), y))
  # Var(u1 + u2) = 1/6; standard error of the MC mean ≈ 0.0005.
  assert abs(mc - tasks.get_task("adding").baseline(4)) < 3e-3
  # And 1 is the best constant: the mean of the target.
  assert abs(float(jnp.mean(y)) - 1.0) < 5e-3


@pytest.mark.parametrize("T", [1, 5, 100])
def test_memory_layout(T):
  x, labels = jax.jit(tasks.memory_batch, static_argnums=(1, 2))(jax.random.key(T), 300, T)
  x, labels = np.asarray(x), np.asarray(labels)
  L = T + 20
  assert x.shape == (300, L, 10) and labels.shape == (300, L) and labels.dtype == np.int32
  np.testing.assert_array_equal(x.sum(-1), 1)  # one-hot
  inputs = x.argmax(-1)
  symbols = inputs[:, :10]
  assert symbols.min() >= 1 and symbols.max() <= 8
  np.testing.assert_array_equal(inputs[:, 10:T + 9], 0)    # T - 1 blanks
  np.testing.assert_array_equal(inputs[:, T + 9], 9)       # the delimiter
  np.testing.assert_array_equal(inputs[:, T + 10:], 0)     # 10 blanks
  np.testing.assert_array_equal(labels[:, :T + 10], 0)
  np.testing.assert_array_equal(labels[:, T + 10:], symbols)
  assert labels.max() <= 8


def test_memory_symbols_uniform():
  _, labels = tasks.memory_batch(jax.random.key(3), 5000, 3)
  counts = np.bincount(np.asarray(labels[:, -10:]).ravel(), minlength=9)
  assert counts[0] == 0
  np.testing.assert_allclose(counts[1:] / counts[1:].sum(), 1 / 8, atol=0.01)


@pytest.mark.parametrize("T", [100, 1000])
def test_memory_baseline_is_the_memoryless_predictor(T):
  # The loss of this predictor does not depend on the draw: a few sequences suffice.
  x, labels = tasks.memory_batch(jax.random.key(4), 4, T)
  # Blanks for sure until the data is due, then uniform over the 8 symbols.
  logits = np.full(labels.shape + (9,), -1e9, np.float32)
  logits[:, :T + 10, 0] = 0.0
  logits[:, T + 10:, 1:] = 0.0
  loss = float(tasks.memory_loss(jnp.asarray(logits), labels))
  np.testing.assert_allclose(loss, tasks.memory_baseline(T), rtol=1e-5)
  np.testing.assert_allclose(tasks.memory_baseline(100), 10 * math.log(8) / 120)
  assert abs(tasks.memory_baseline(100) - 0.1733) < 1e-4


def test_batches_depend_on_the_key_only():
  a = tasks.memory_batch(jax.random.key(5), 8, 12)
  b = tasks.memory_batch(jax.random.key(5), 8, 12)
  c = tasks.memory_batch(jax.random.key(6), 8, 12)
  np.testing.assert_array_equal(a[1], b[1])
  assert not np.array_equal(a[1], c[1])


def test_bad_arguments():
  with pytest.raises(ValueError, match="T must be"):
    tasks.adding_batch(jax.random.key(0), 2, 1)
  with pytest.raises(ValueError, match="batch_size"):
    tasks.memory_batch(jax.random.key(0), 0, 5)
  with pytest.raises(ValueError, match="unknown task"):
    tasks.get_task("parity")
  assert tasks.get_task("copy").name == "memory"
  assert tasks.get_task("memory").length(100) == 120
