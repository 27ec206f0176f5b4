"""Tests of SequenceModel: initial states, arguments, the fast-path protocols, tracing.

Shapes and raised errors come from `jax.eval_shape` (nothing compiles), numbers from a
few jitted programs on parameters drawn in numpy (run eagerly, every primitive
compiles on its own, and compiling is most of the time).
"""

import math

import chex
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary import nn as lnn
from lie_unitary.experiments.rnn import data as tasks

import helpers

pytestmark = pytest.mark.usefixtures("fast_compiles")

# An adding-problem batch (x, y) from a key, for static batch size and length.
_adding_batch = jax.jit(tasks.adding_batch, static_argnums=(1, 2))


_random_params = helpers.random_params


def test_random_initial_state():
  n = 30
  cell = lnn.GURNNCell(n)
  model = lnn.SequenceModel(cell, 1)

  @jax.jit
  def setup(keys):
    return cell.initialize_carry(keys[0], (1000, 2)), tasks.adding_batch(keys[1], 2, 5)[0]

  h0, x = setup((jax.random.key(0), jax.random.key(1)))
  params = _random_params(model.init, jax.random.key(2), x, jax.random.key(3))
  h0 = np.asarray(h0)
  s = math.sqrt(3 / (2 * n))
  assert h0.shape == (1000, 2 * n) and np.max(np.abs(h0)) <= s
  assert abs(np.std(h0) - s / math.sqrt(3)) < 0.01   # U(-s, s) has std s/√3
  apply = jax.jit(model.apply)
  a = apply(params, x, jax.random.key(4))
  assert not np.allclose(a, apply(params, x, jax.random.key(5)))   # redrawn per key
  np.testing.assert_array_equal(a, apply(params, x, jax.random.key(4)))
  with pytest.raises(ValueError, match="carry_key"):
    jax.eval_shape(model.apply, params, x)
  zeros = jax.jit(lnn.SequenceModel(lnn.GURNNCell(n, h0="zeros"), 1).apply)
  np.testing.assert_array_equal(zeros(params, x, jax.random.key(4)),
                                zeros(params, x, jax.random.key(5)))


def test_lstm_and_bad_arguments():
  # Shapes and errors only: `jax.eval_shape` runs the modules' Python, compiling nothing.
  x, _ = jax.eval_shape(lambda key: tasks.adding_batch(key, 2, 5), jax.random.key(0))
  key = jax.random.key(1)
  model = lnn.SequenceModel(nn.OptimizedLSTMCell(4), 1)
  params = jax.eval_shape(model.init, key, x)
  assert jax.eval_shape(model.apply, params, x).shape == (2, 1)
  with pytest.raises(ValueError, match="readout"):
    jax.eval_shape(lnn.SequenceModel(nn.OptimizedLSTMCell(4), 1, readout="first").init, key, x)
  for bad, match in ((jax.ShapeDtypeStruct((2, 0, 2), jnp.float32), r"L, D ≥ 1; got .*\(2, 0, 2\)"),
                     (jax.ShapeDtypeStruct((2, 5, 0), jnp.float32), r"L, D ≥ 1; got .*\(2, 5, 0\)"),
                     (jax.ShapeDtypeStruct((2, 5, 2), jnp.complex64), "real; got dtype complex64")):
    with pytest.raises(ValueError, match=match):
      jax.eval_shape(model.init, key, bad)
  for k in (0, -1, 2.0):  # not a ZeroDivisionError or a shape TypeError
    with pytest.raises(ValueError, match=f"num_outputs must be a positive integer; got {k}"):
      jax.eval_shape(lnn.SequenceModel(lnn.SimpleRNNCell(2), k).init, key, x)
  for features, shape, match in ((0, (2, 2), "features must be a positive integer; got 0"),
                                 (2, (), r"\(..., D\) with D ≥ 1; got x.shape=\(\)")):
    x_in = jax.ShapeDtypeStruct(shape, jnp.float32)
    with pytest.raises(ValueError, match=match):
      jax.eval_shape(lnn.InputProjection(features).init, key, x_in)
  h, x_t = jax.ShapeDtypeStruct((1, 8), jnp.float32), jax.ShapeDtypeStruct((1, 2), x.dtype)
  with pytest.raises(ValueError, match="h0"):
    jax.eval_shape(lnn.GURNNCell(4, h0="learned").init, key, h, x_t)
  with pytest.raises(ValueError, match="activation"):
    jax.eval_shape(lnn.GURNNCell(4, activation="gelu").init, key, h, x_t)


def test_fast_path_protocols():
  # Structural checks on flax modules (dataclasses): flax's own cells lack the fast-path
  # methods; ours have them, `scan` only where a hand-written loop exists. Bound (as
  # SequenceModel sees its cell, where attribute lookup may run `setup`) and unbound.
  cases = [(nn.OptimizedLSTMCell(4), False, False), (nn.LSTMCell(4), False, False),
           (nn.GRUCell(4), False, False),
           (lnn.GURNNCell(3), True, True), (lnn.GURNNCell(3, activation="modrelu"), True, True),
           (lnn.GURNNCell(3, unconstrained=True), True, True),
           (lnn.SimpleRNNCell.irnn(3), True, True), (lnn.SimpleRNNCell.tanh_rnn(3), True, True),
           (lnn.URNNCell(4), True, False)]
  rng = np.random.default_rng(0)
  normal = lambda a: rng.standard_normal(a.shape).astype(a.dtype)
  x = normal(np.zeros((2, 3), np.float32))
  keys = jax.random.key(0), jax.random.key(1)
  fast_cells, fast_args = [], []
  for cell, fast, scanning in cases:
    # Shapes only (`jax.eval_shape`: nothing compiles): enough to bind the cell.
    carry, variables = jax.eval_shape(
        lambda k: (lambda c: (c, cell.init(k[1], c, x)))(cell.initialize_carry(k[0], x.shape)),
        keys)
    bound = cell.bind(variables)
    for c in (cell, bound):
      name = type(c).__name__
      assert isinstance(c, lnn.FastPathCell) == fast, name
      assert isinstance(c, lnn.ScanningCell) == scanning, name
      if scanning:
        assert isinstance(c, lnn.FastPathCell), name
    if fast:  # random values: a generic state and parameters, not the init's
      fast_cells.append(cell)
      fast_args.append(jax.tree.map(normal, (carry, variables)))

  # The contract: __call__ is step ∘ (project_inputs, transition). All fast cells in
  # one jitted program.
  @jax.jit
  def both_ways(fast_args):
    outputs = []
    for cell, (carry, variables) in zip(fast_cells, fast_args):
      bound = cell.bind(variables)
      outputs.append((bound(carry, x)[0],
                      bound.step(carry, bound.project_inputs(x), bound.transition())[0]))
    return outputs

  for cell, (y_call, y_split) in zip(fast_cells, both_ways(fast_args)):
    np.testing.assert_array_equal(y_call, y_split, err_msg=type(cell).__name__)


def test_jitted_training_step_traces_once():
  # New params, data and carry keys with the same shapes reuse the compiled step; a new
  # sequence length traces again (so the counter is live).
  model = lnn.SequenceModel(lnn.GURNNCell(4, beta=1.4), 1)
  x, y = _adding_batch(jax.random.key(0), 3, 6)
  params = _random_params(model.init, jax.random.key(1), x, jax.random.key(2))
  chex.clear_trace_counter()

  @jax.jit
  @chex.assert_max_traces(n=1)
  def train_step(params, x, y, carry_key):
    loss_fn = lambda p: tasks.adding_loss(model.apply(p, x, carry_key)[:, 0], y)
    loss, grads = jax.value_and_grad(loss_fn)(params)
    return loss, jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)

  for step in range(3):
    x, y = _adding_batch(jax.random.fold_in(jax.random.key(3), step), 3, 6)
    _, params = train_step(params, x, y, jax.random.fold_in(jax.random.key(4), step))
  x, y = _adding_batch(jax.random.key(5), 3, 7)
  with pytest.raises(AssertionError):
    train_step(params, x, y, jax.random.key(6))


def test_torch_linear_init_bounds_and_errors():
  kernel_init, bias_init = lnn.torch_linear_init(64)
  kernel = np.asarray(kernel_init(jax.random.key(0), (64, 500)))
  bias = np.asarray(bias_init(jax.random.key(1), (500,)))
  for w in (kernel, bias):  # U(±1/8): PyTorch's nn.Linear with 64 inputs
    assert np.all(np.abs(w) <= 1 / 8) and np.max(np.abs(w)) > 0.99 / 8
  np.testing.assert_allclose(kernel.std(), 1 / (8 * math.sqrt(3)), rtol=0.02)
  model = lnn.SequenceModel(lnn.SimpleRNNCell.tanh_rnn(64), 3, readout_kernel_init=kernel_init,
                            readout_bias_init=bias_init)
  readout = model.init(jax.random.key(2), jnp.zeros((1, 2, 1)))["params"]["readout"]
  assert np.all(np.abs(readout["bias"]) > 0) and np.all(np.abs(readout["kernel"]) <= 1 / 8)
  for bad in (0, True, 4.0):
    with pytest.raises(ValueError, match="fan_in must be a positive integer"):
      lnn.torch_linear_init(bad)
  assert lnn.torch_linear_init(np.int64(4))[0](jax.random.key(0), (3,)).shape == (3,)
