"""Tests of SequenceModel: initial states, arguments, the fast-path protocols, tracing."""

import math

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary import nn as lnn
from lie_unitary.experiments.rnn import data as tasks

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


def test_fast_path_protocols():
  # Structural checks on flax modules (dataclasses): flax's own cells lack the fast-path
  # methods; ours have them, `scan` only where a hand-written loop exists. Bound (as
  # SequenceModel sees its cell, where attribute lookup may run `setup`) and unbound.
  x = jnp.zeros((2, 3))
  cases = [(nn.OptimizedLSTMCell(4), False, False), (nn.LSTMCell(4), False, False),
           (nn.GRUCell(4), False, False),
           (lnn.GURNNCell(3), True, True), (lnn.GURNNCell(3, activation="modrelu"), True, True),
           (lnn.GURNNCell(3, unconstrained=True), True, True),
           (lnn.SimpleRNNCell.irnn(3), True, True), (lnn.SimpleRNNCell.tanh_rnn(3), True, True),
           (lnn.URNNCell(4), True, False)]
  for cell, fast, scanning in cases:
    carry = cell.initialize_carry(jax.random.key(0), x.shape)
    bound = cell.bind(cell.init(jax.random.key(1), carry, x))
    for c in (cell, bound):
      name = type(c).__name__
      assert isinstance(c, lnn.FastPathCell) == fast, name
      assert isinstance(c, lnn.ScanningCell) == scanning, name
      if scanning:
        assert isinstance(c, lnn.FastPathCell), name
    if fast:  # the contract: __call__ is step ∘ (project_inputs, transition)
      y_call = bound(carry, x)
      y_split = bound.step(carry, bound.project_inputs(x), bound.transition())
      np.testing.assert_array_equal(y_call[0], y_split[0], err_msg=type(cell).__name__)


def test_jitted_training_step_traces_once():
  # New params, data and carry keys with the same shapes reuse the compiled step; a new
  # sequence length traces again (so the counter is live).
  model = lnn.SequenceModel(lnn.GURNNCell(4, beta=1.4), 1)
  x, y = tasks.adding_batch(jax.random.key(0), 3, 6)
  params = model.init(jax.random.key(1), x, jax.random.key(2))
  chex.clear_trace_counter()

  @jax.jit
  @chex.assert_max_traces(n=1)
  def train_step(params, x, y, carry_key):
    loss_fn = lambda p: tasks.adding_loss(model.apply(p, x, carry_key)[:, 0], y)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)

  for step in range(3):
    x, y = tasks.adding_batch(jax.random.fold_in(jax.random.key(3), step), 3, 6)
    _, params = train_step(params, x, y, jax.random.fold_in(jax.random.key(4), step))
  x, y = tasks.adding_batch(jax.random.key(5), 3, 7)
  with pytest.raises(AssertionError):
    train_step(params, x, y, jax.random.key(6))
