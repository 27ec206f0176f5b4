"""Tests of SequenceModel: initial states and arguments."""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary import nn as lnn
from lie_unitary.experiments.rnn import tasks


pytestmark = pytest.mark.usefixtures("fast_compiles")


def test_random_initial_state():
  n = 30
  cell = lnn.GURNNCell(n)
  h0 = cell.initialize_carry(jax.random.key(0), (1000, 2))
  s = math.sqrt(3 / (2 * n))
  assert h0.shape == (1000, 2 * n) and float(jnp.max(jnp.abs(h0))) <= s
  assert abs(float(jnp.std(h0)) - s / math.sqrt(3)) < 0.01   # U(-s, s) has std s/√3
  x, _ = tasks.adding_batch(jax.random.key(1), 2, 5)
  model = lnn.SequenceModel(cell, 1)
  params = jax.jit(model.init)(jax.random.key(2), x, jax.random.key(3))
  apply = jax.jit(model.apply)
  a = apply(params, x, jax.random.key(4))
  assert not np.allclose(a, apply(params, x, jax.random.key(5)))   # redrawn per key
  np.testing.assert_array_equal(a, apply(params, x, jax.random.key(4)))
  with pytest.raises(ValueError, match="carry_key"):
    model.apply(params, x)
  zeros = jax.jit(lnn.SequenceModel(lnn.GURNNCell(n, h0="zeros"), 1).apply)
  np.testing.assert_array_equal(zeros(params, x, jax.random.key(4)),
                                zeros(params, x, jax.random.key(5)))


def test_lstm_and_bad_arguments():
  x, _ = tasks.adding_batch(jax.random.key(0), 2, 5)
  model = lnn.SequenceModel(nn.OptimizedLSTMCell(4), 1)
  params = model.init(jax.random.key(1), x)
  assert model.apply(params, x).shape == (2, 1)
  with pytest.raises(ValueError, match="readout"):
    lnn.SequenceModel(nn.OptimizedLSTMCell(4), 1, readout="first").init(jax.random.key(1), x)
  with pytest.raises(ValueError, match="h0"):
    lnn.GURNNCell(4, h0="learned").init(jax.random.key(0), jnp.zeros((1, 8)), x[:, 0])
  with pytest.raises(ValueError, match="activation"):
    lnn.GURNNCell(4, activation="gelu").init(jax.random.key(0), jnp.zeros((1, 8)), x[:, 0])

