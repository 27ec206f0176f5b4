"""SequenceModel against flax.linen.RNN: the same numbers and gradients, one eigh per
forward pass instead of one per step (paper §4).

The eigh counts read jaxprs of abstract values (nothing runs); each numerical test runs
its model work as one `jax.jit` program (run eagerly, every primitive compiles on its
own, and compiling is most of the time), on parameters drawn in numpy.
"""

import flax.linen as nn
import jax
from jax.extend import core as jex_core
import numpy as np
import pytest

from lie_unitary import nn as lnn
from lie_unitary.experiments.rnn import data as tasks

import helpers

pytestmark = pytest.mark.usefixtures("fast_compiles")


def _executed_eigh_count(jaxpr, multiplier=1) -> int:
  """eigh equations in a (closed) jaxpr, each weighted by how often its loop runs it."""
  count = 0
  for eqn in jaxpr.eqns:
    if eqn.primitive.name == "eigh":
      count += multiplier
    inner = multiplier * (eqn.params["length"] if eqn.primitive.name == "scan" else 1)
    if eqn.primitive.name == "while":
      inner = multiplier * 10**6  # unknown trip count: make any eigh in it count a lot
    for value in eqn.params.values():
      for sub in value if isinstance(value, (tuple, list)) else (value,):
        if isinstance(sub, jex_core.ClosedJaxpr):
          count += _executed_eigh_count(sub.jaxpr, inner)
        elif isinstance(sub, jex_core.Jaxpr):
          count += _executed_eigh_count(sub, inner)
  return count


def _batch(make_batch, seed, batch_size, T):
  """(x, y) of a task's batch, drawn by one jitted program."""
  return jax.jit(make_batch, static_argnums=(1, 2))(jax.random.key(seed), batch_size, T)


def _abstract_batch(make_batch, batch_size, T):
  """The shapes and dtypes of a task's (x, y), computing nothing."""
  return jax.eval_shape(lambda key: make_batch(key, batch_size, T), jax.random.key(0))


_random_params = helpers.random_params


def _loss_and_grad(model, params, x, y):
  def loss(p):
    return tasks.adding_loss(model.apply(p, x, jax.random.key(7))[:, 0], y)
  return jax.value_and_grad(loss)(params)


def test_one_eigh_per_forward_and_backward_pass():
  T = 50
  x, y = _abstract_batch(tasks.adding_batch, 4, T)
  model = lnn.SequenceModel(lnn.GURNNCell(6, beta=1.4), 1)
  params = jax.eval_shape(model.init, jax.random.key(1), x, jax.random.key(2))
  closed = jax.make_jaxpr(lambda p, x, y: _loss_and_grad(model, p, x, y))(params, x, y)
  assert _executed_eigh_count(closed.jaxpr) == 1
  forward = jax.make_jaxpr(lambda p, x: model.apply(p, x, jax.random.key(7)))(params, x)
  assert _executed_eigh_count(forward.jaxpr) == 1
  # The compiled program has exactly one eigh kernel (a LAPACK heevd custom call on CPU).
  hlo = jax.jit(lambda p, x, y: _loss_and_grad(model, p, x, y)).lower(
      params, x, y).compile().as_text()
  calls = [l for l in hlo.splitlines() if "custom-call(" in l and "custom_call_target" in l
           and ("heevd" in l or "eigh" in l.lower() or "syevd" in l)]
  if jax.default_backend() == "cpu":
    assert len(calls) == 1, calls


def test_eigh_counter_sees_per_step_eigh_under_nn_rnn():
  # The same cell scanned by nn.RNN forms U at every step: the counter must notice,
  # or the test above could not fail.
  T = 50
  x, _ = _abstract_batch(tasks.adding_batch, 4, T)
  cell = lnn.GURNNCell(6)
  layer = nn.RNN(cell)
  carry = jax.eval_shape(lambda key: cell.initialize_carry(key, x.shape[:1] + x.shape[2:]),
                         jax.random.key(3))
  params = jax.eval_shape(lambda key, x, carry: layer.init(key, x, initial_carry=carry),
                          jax.random.key(1), x, carry)
  closed = jax.make_jaxpr(lambda p, x, carry: layer.apply(p, x, initial_carry=carry))(
      params, x, carry)
  assert _executed_eigh_count(closed.jaxpr) >= T
  # (Under jax.grad, JAX's scan partial evaluation happens to hoist some loop-invariant
  # work out of nn.RNN's loop; SequenceModel does not rely on that.)


def test_sequence_model_matches_nn_rnn():
  x, _ = _batch(tasks.memory_batch, 0, 3, 6)
  # The two scan paths: the hand-written recurrence (guRNN, and the IRNN / tanh RNN
  # through the same code) and nn.scan over `step` (ruRNN).
  for cell in (lnn.GURNNCell(5, beta=1.05, activation="tanh"), lnn.URNNCell(8)):
    model = lnn.SequenceModel(cell, 9, readout="all")

    params = _random_params(model.init, jax.random.key(1), x, jax.random.key(2))

    @jax.jit
    def run(params, x, key):
      out = model.apply(params, x, key)
      carry = cell.initialize_carry(key, x[:, 0].shape)
      hs = nn.RNN(cell).apply({"params": {"cell": params["params"]["cell"]}}, x,
                              initial_carry=carry)
      return out, nn.Dense(9).apply({"params": params["params"]["readout"]}, hs)

    out, ref = run(params, x, jax.random.key(4))
    assert out.shape == (3, 26, 9)
    np.testing.assert_allclose(out, ref, atol=2e-5, err_msg=type(cell).__name__)


def test_sequence_model_gradient_matches_nn_scan_path():
  # The fast path (hand-written VJP) against plain autodiff through nn.RNN.
  x, y = _batch(tasks.adding_batch, 0, 3, 8)
  cell = lnn.GURNNCell(4, beta=1.4)
  model = lnn.SequenceModel(cell, 1)

  params = _random_params(model.init, jax.random.key(1), x, jax.random.key(2))

  @jax.jit
  def run(params, x, y):
    carry = cell.initialize_carry(jax.random.key(4), x[:, 0].shape)

    def ref_loss(p):
      hs = nn.RNN(cell).apply({"params": {"cell": p["params"]["cell"]}}, x,
                              initial_carry=carry)
      out = nn.Dense(1).apply({"params": p["params"]["readout"]}, hs[:, -1])
      return tasks.adding_loss(out[:, 0], y)

    ours = jax.grad(lambda p: tasks.adding_loss(model.apply(p, x, jax.random.key(4))[:, 0], y))
    return ours(params), jax.grad(ref_loss)(params)

  ours, ref = run(params, x, y)
  for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(ref)):
    # float32 sums: an entry's error scales with its array's largest entry.
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6 * max(1.0, np.abs(b).max()))


def test_gurnn_modrelu_sequence_model_matches_nn_rnn_with_gradients():
  # SequenceModel scans modReLU with lax.scan (one eigh); nn.RNN calls the cell per step.
  x, y = _batch(tasks.adding_batch, 0, 3, 8)
  cell = lnn.GURNNCell(4, activation="modrelu", h0="zeros")
  model = lnn.SequenceModel(cell, 1)
  loss = lambda p: tasks.adding_loss(model.apply(p, x)[:, 0], y)

  params = _random_params(model.init, jax.random.key(1), x)

  @jax.jit
  def run(params):
    carry = cell.initialize_carry(None, x[:, 0].shape)

    def ref_loss(p):
      hs = nn.RNN(cell).apply({"params": {"cell": p["params"]["cell"]}}, x,
                              initial_carry=carry)
      out = nn.Dense(1).apply({"params": p["params"]["readout"]}, hs[:, -1])
      return tasks.adding_loss(out[:, 0], y)

    return (loss(params), ref_loss(params)), (jax.grad(loss)(params),
                                              jax.grad(ref_loss)(params))

  losses, (ours, ref) = run(params)
  np.testing.assert_allclose(*losses, rtol=1e-5)
  for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(ref)):
    # float32 sums of gradients up to ~250: an entry's error scales with its array's.
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6 * max(1.0, np.abs(b).max()))
  closed = jax.make_jaxpr(jax.grad(loss))(params)
  assert _executed_eigh_count(closed.jaxpr) == 1


def test_nn_rnn_without_init_key_reuses_one_initial_state():
  # flax.linen.RNN draws the initial carry from a FIXED key when init_key is None: with
  # a random h0 the "random" state is then the same at every training step. Pass a key
  # folded with the step (docs/nn.md).
  x, _ = _batch(tasks.adding_batch, 0, 2, 5)
  layer = nn.RNN(lnn.GURNNCell(3))
  params = _random_params(lambda key, x: layer.init(key, x, init_key=jax.random.key(2)),
                          jax.random.key(1), x)

  @jax.jit
  def run(params, x):
    key = jax.random.key(3)
    return (layer.apply(params, x), layer.apply(params, x),
            layer.apply(params, x, init_key=jax.random.key(0)),
            layer.apply(params, x, init_key=jax.random.fold_in(key, 0)),
            layer.apply(params, x, init_key=jax.random.fold_in(key, 1)))

  no_key, again, key0, step0, step1 = run(params, x)
  np.testing.assert_array_equal(no_key, again)
  np.testing.assert_array_equal(no_key, key0)
  assert not np.allclose(step0, step1)
