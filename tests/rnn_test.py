"""Tests of the recurrent cells and the sequence model (paper §4, SPEC §4)."""

import math

import flax.linen as nn
import jax
from jax.extend import core as jex_core
import jax.numpy as jnp
import numpy as np
import pytest

import lie_unitary as lu
from lie_unitary.experiments.rnn import tasks
from lie_unitary.nn import rnn


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


def _loss_and_grad(model, params, x, y):
  def loss(p):
    return tasks.adding_loss(model.apply(p, x, jax.random.key(7))[:, 0], y)
  return jax.value_and_grad(loss)(params)


def test_one_eigh_per_forward_and_backward_pass():
  T = 50
  x, y = tasks.adding_batch(jax.random.key(0), 4, T)
  model = rnn.SequenceModel(rnn.GURNNCell(6, beta=1.4), 1)
  params = model.init(jax.random.key(1), x, jax.random.key(2))
  closed = jax.make_jaxpr(lambda p: _loss_and_grad(model, p, x, y))(params)
  assert _executed_eigh_count(closed.jaxpr) == 1
  forward = jax.make_jaxpr(lambda p: model.apply(p, x, jax.random.key(7)))(params)
  assert _executed_eigh_count(forward.jaxpr) == 1
  # The compiled program has exactly one eigh kernel (a LAPACK heevd custom call on CPU).
  hlo = jax.jit(lambda p: _loss_and_grad(model, p, x, y)).lower(params).compile().as_text()
  calls = [l for l in hlo.splitlines() if "custom-call(" in l and "custom_call_target" in l
           and ("heevd" in l or "eigh" in l.lower() or "syevd" in l)]
  if jax.default_backend() == "cpu":
    assert len(calls) == 1, calls


def test_eigh_counter_sees_per_step_eigh_under_nn_rnn():
  # The same cell scanned by nn.RNN forms U at every step: the counter must notice,
  # or the test above could not fail.
  T = 50
  x, _ = tasks.adding_batch(jax.random.key(0), 4, T)
  cell = rnn.GURNNCell(6)
  layer = nn.RNN(cell)
  carry = cell.initialize_carry(jax.random.key(3), x[:, 0].shape)
  params = layer.init(jax.random.key(1), x, initial_carry=carry)
  closed = jax.make_jaxpr(lambda p: layer.apply(p, x, initial_carry=carry))(params)
  assert _executed_eigh_count(closed.jaxpr) >= T
  # (Under jax.grad, JAX's scan partial evaluation happens to hoist some loop-invariant
  # work out of nn.RNN's loop; SequenceModel does not rely on that.)


def test_sequence_model_matches_nn_rnn():
  x, _ = tasks.memory_batch(jax.random.key(0), 3, 6)
  # The two scan paths: the hand-written recurrence (guRNN, and the IRNN / tanh RNN
  # through the same code) and nn.scan over `step` (ruRNN).
  for cell in (rnn.GURNNCell(5, beta=1.05, activation="tanh"), rnn.URNNCell(8)):
    model = rnn.SequenceModel(cell, 9, readout="all")
    params = jax.jit(model.init)(jax.random.key(1), x, jax.random.key(2))
    out = jax.jit(model.apply)(params, x, jax.random.key(4))
    assert out.shape == (3, 26, 9)
    carry = cell.initialize_carry(jax.random.key(4), x[:, 0].shape)

    @jax.jit
    def ref_apply(params):
      hs = nn.RNN(cell).apply({"params": {"cell": params["params"]["cell"]}}, x,
                              initial_carry=carry)
      return nn.Dense(9).apply({"params": params["params"]["readout"]}, hs)

    ref = ref_apply(params)
    np.testing.assert_allclose(out, ref, atol=2e-5, err_msg=type(cell).__name__)


def test_gurnn_step_is_the_complex_recurrence():
  n, D, beta = 5, 3, 1.4
  cell = rnn.GURNNCell(n, beta=beta, activation="tanh")
  h = jax.random.normal(jax.random.key(0), (4, 2 * n))
  x = jax.random.normal(jax.random.key(1), (4, D))
  params = cell.init(jax.random.key(2), h, x)
  new, out = cell.apply(params, h, x)
  p = params["params"]
  u = lu.unitary_from_lambdas(p["lam"])
  hc = h[:, :n] + 1j * h[:, n:]
  uh = beta * hc @ u.T
  v, b = p["v"]["kernel"], p["v"]["bias"]
  pre_re = jnp.real(uh) + x @ v[:, :n] + b[:n]
  pre_im = jnp.imag(uh) + x @ v[:, n:] + b[n:]
  np.testing.assert_allclose(new, jnp.tanh(jnp.concatenate([pre_re, pre_im], -1)), atol=1e-5)
  np.testing.assert_array_equal(new, out)
  # β = 1: the transition is orthogonal (a unitary matrix as a real block matrix).
  m = cell.apply(params, method=lambda c: c.transition()) / beta
  np.testing.assert_allclose(m.T @ m, np.eye(2 * n), atol=1e-5)


def test_urnn_step_is_modrelu_of_the_composition():
  n, D = 8, 2
  cell = rnn.URNNCell(n, permutation_seed=3)
  h = jax.random.normal(jax.random.key(0), (4, 2 * n))
  x = jax.random.normal(jax.random.key(1), (4, D))
  params = cell.init(jax.random.key(2), h, x)
  new, _ = cell.apply(params, h, x)
  p = params["params"]
  perm = np.random.RandomState(3).permutation(n)
  u = lu.arjovsky_unitary(p["angles"], p["reflections_re"], p["reflections_im"], perm)
  z = (h[:, :n] + 1j * h[:, n:]) @ u.T + x @ (p["v"]["kernel"][:, :n] + 1j * p["v"]["kernel"][:, n:])
  ref = rnn.modrelu(z, p["bias"])
  np.testing.assert_allclose(new, jnp.concatenate([jnp.real(ref), jnp.imag(ref)], -1),
                             atol=1e-5)
  assert np.all(np.abs(p["bias"]) <= 0.01)
  # modReLU: zero where |z| + b < 0, else the phase of z kept and the modulus shifted.
  z = jnp.array([0.3 + 0.4j, 0.001 + 0j])
  out = rnn.modrelu(z, jnp.array([-0.1, -0.1]), eps=0.0)
  np.testing.assert_allclose(out, [0.4 / 0.5 * (0.3 + 0.4j), 0.0], atol=1e-6)


def test_irnn_init():
  cell = rnn.SimpleRNNCell.irnn(30)
  params = cell.init(jax.random.key(0), jnp.zeros((1, 30)), jnp.zeros((1, 2)))["params"]
  np.testing.assert_array_equal(params["w"], np.eye(30))
  assert 0.5e-3 < float(jnp.std(params["v"]["kernel"])) < 2e-3


def test_random_initial_state():
  n = 30
  cell = rnn.GURNNCell(n)
  h0 = cell.initialize_carry(jax.random.key(0), (1000, 2))
  s = math.sqrt(3 / (2 * n))
  assert h0.shape == (1000, 2 * n) and float(jnp.max(jnp.abs(h0))) <= s
  assert abs(float(jnp.std(h0)) - s / math.sqrt(3)) < 0.01   # U(-s, s) has std s/√3
  x, _ = tasks.adding_batch(jax.random.key(1), 2, 5)
  model = rnn.SequenceModel(cell, 1)
  params = jax.jit(model.init)(jax.random.key(2), x, jax.random.key(3))
  apply = jax.jit(model.apply)
  a = apply(params, x, jax.random.key(4))
  assert not np.allclose(a, apply(params, x, jax.random.key(5)))   # redrawn per key
  np.testing.assert_array_equal(a, apply(params, x, jax.random.key(4)))
  with pytest.raises(ValueError, match="carry_key"):
    model.apply(params, x)
  zeros = jax.jit(rnn.SequenceModel(rnn.GURNNCell(n, h0="zeros"), 1).apply)
  np.testing.assert_array_equal(zeros(params, x, jax.random.key(4)),
                                zeros(params, x, jax.random.key(5)))


def test_lstm_and_bad_arguments():
  x, _ = tasks.adding_batch(jax.random.key(0), 2, 5)
  model = rnn.SequenceModel(nn.OptimizedLSTMCell(4), 1)
  params = model.init(jax.random.key(1), x)
  assert model.apply(params, x).shape == (2, 1)
  with pytest.raises(ValueError, match="readout"):
    rnn.SequenceModel(nn.OptimizedLSTMCell(4), 1, readout="first").init(jax.random.key(1), x)
  with pytest.raises(ValueError, match="h0"):
    rnn.GURNNCell(4, h0="learned").init(jax.random.key(0), jnp.zeros((1, 8)), x[:, 0])
  with pytest.raises(ValueError, match="activation"):
    rnn.GURNNCell(4, activation="gelu").init(jax.random.key(0), jnp.zeros((1, 8)), x[:, 0])


@pytest.mark.parametrize("activation", ["relu", "tanh", "identity"])
def test_elementwise_recurrence_gradient_matches_autodiff(activation):
  k = jax.random.split(jax.random.key(0), 4)
  L, B, H = 9, 3, 5
  w = jax.random.normal(k[0], (H, H), jnp.float64 if jax.config.x64_enabled else jnp.float32)
  w = w / math.sqrt(H) * 1.3
  h0 = jax.random.normal(k[1], (B, H))
  p = jax.random.normal(k[2], (L, B, H))
  weights = jax.random.normal(k[3], (L, B, H))
  f = {"relu": nn.relu, "tanh": jnp.tanh, "identity": lambda a: a}[activation]

  def reference(w, h0, p):
    def body(h, p_t):
      h = f(h @ w + p_t)
      return h, h
    return jax.lax.scan(body, h0, p)[1]

  def loss(fn, *args):
    return jnp.sum(jnp.sin(fn(*args)) * weights)

  ours = jax.grad(lambda *a: loss(lambda *b: rnn.elementwise_recurrence(*b, activation), *a),
                  argnums=(0, 1, 2))(w, h0, p)
  ref = jax.grad(lambda *a: loss(reference, *a), argnums=(0, 1, 2))(w, h0, p)
  np.testing.assert_allclose(rnn.elementwise_recurrence(w, h0, p, activation),
                             reference(w, h0, p), atol=1e-5)
  for a, b in zip(ours, ref):
    assert float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b)) < 1e-5
  with pytest.raises(ValueError, match="expected"):
    rnn.elementwise_recurrence(w, h0, p[:, :, :2], activation)


def test_sequence_model_gradient_matches_nn_scan_path():
  # The fast path (hand-written VJP) against plain autodiff through nn.RNN.
  x, y = tasks.adding_batch(jax.random.key(0), 3, 8)
  cell = rnn.GURNNCell(4, beta=1.4)
  model = rnn.SequenceModel(cell, 1)
  params = model.init(jax.random.key(1), x, jax.random.key(2))
  carry = cell.initialize_carry(jax.random.key(4), x[:, 0].shape)

  def ref_loss(p):
    hs = nn.RNN(cell).apply({"params": {"cell": p["params"]["cell"]}}, x, initial_carry=carry)
    out = nn.Dense(1).apply({"params": p["params"]["readout"]}, hs[:, -1])
    return tasks.adding_loss(out[:, 0], y)

  ours = jax.jit(jax.grad(
      lambda p: tasks.adding_loss(model.apply(p, x, jax.random.key(4))[:, 0], y)))
  ref = jax.jit(jax.grad(ref_loss))
  for a, b in zip(jax.tree.leaves(ours(params)), jax.tree.leaves(ref(params))):
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6)


def test_input_kernel_halves_are_glorot_for_d_by_n():
  # V = [V_re | V_im] (D, 2n): each half drawn as a Glorot-uniform (D, n) matrix.
  n, D = 50, 3
  cell = rnn.GURNNCell(n)
  params = cell.init(jax.random.key(0), jnp.zeros((1, 2 * n)), jnp.zeros((1, D)))
  v = params["params"]["v"]["kernel"]
  assert v.shape == (D, 2 * n)
  bound = np.sqrt(6 / (D + n))
  for half in (v[:, :n], v[:, n:]):
    assert np.abs(half).max() <= bound
    assert np.abs(half).max() > np.sqrt(6 / (D + 2 * n))  # not the (D, 2n) Glorot scale
  assert not np.allclose(v[:, :n], v[:, n:])


def test_gurnn_modrelu_step_is_modrelu_of_the_complex_recurrence():
  n, D = 5, 3
  cell = rnn.GURNNCell(n, activation="modrelu")
  h = jax.random.normal(jax.random.key(0), (4, 2 * n))
  x = jax.random.normal(jax.random.key(1), (4, D))
  params = cell.init(jax.random.key(2), h, x)
  new, _ = cell.apply(params, h, x)
  p = params["params"]
  assert np.all(np.abs(p["modrelu_bias"]) <= 0.01)
  u = lu.unitary_from_lambdas(p["lam"])
  v, b = p["v"]["kernel"], p["v"]["bias"]
  z = ((h[:, :n] + 1j * h[:, n:]) @ u.T + x @ (v[:, :n] + 1j * v[:, n:])
       + (b[:n] + 1j * b[n:]))
  ref = rnn.modrelu(z, p["modrelu_bias"])
  np.testing.assert_allclose(new, jnp.concatenate([jnp.real(ref), jnp.imag(ref)], -1),
                             atol=1e-5)


def test_gurnn_modrelu_sequence_model_matches_nn_rnn_with_gradients():
  # SequenceModel scans modReLU with lax.scan (one eigh); nn.RNN calls the cell per step.
  x, y = tasks.adding_batch(jax.random.key(0), 3, 8)
  cell = rnn.GURNNCell(4, activation="modrelu", h0="zeros")
  model = rnn.SequenceModel(cell, 1)
  params = model.init(jax.random.key(1), x)
  carry = cell.initialize_carry(None, x[:, 0].shape)

  def ref_loss(p):
    hs = nn.RNN(cell).apply({"params": {"cell": p["params"]["cell"]}}, x, initial_carry=carry)
    out = nn.Dense(1).apply({"params": p["params"]["readout"]}, hs[:, -1])
    return tasks.adding_loss(out[:, 0], y)

  loss = lambda p: tasks.adding_loss(model.apply(p, x)[:, 0], y)
  np.testing.assert_allclose(loss(params), ref_loss(params), rtol=1e-5)
  ours, ref = jax.jit(jax.grad(loss))(params), jax.jit(jax.grad(ref_loss))(params)
  for a, b in zip(jax.tree.leaves(ours), jax.tree.leaves(ref)):
    np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-6)
  closed = jax.make_jaxpr(jax.grad(loss))(params)
  assert _executed_eigh_count(closed.jaxpr) == 1


def test_diagonal_phases_init_gives_a_diagonal_unitary():
  n = 6
  lam = rnn.diagonal_phases_init()(jax.random.key(0), (n * n,))
  theta = lam[:n]
  assert np.all(np.abs(theta) <= np.pi) and np.ptp(theta) > 1.0
  np.testing.assert_allclose(lu.unitary_from_lambdas(lam), np.diag(np.exp(1j * theta)),
                             atol=1e-5)
  with pytest.raises(ValueError, match="n²"):
    rnn.diagonal_phases_init()(jax.random.key(0), (7,))


def test_modrelu_recurrence_gradient_matches_autodiff():
  # The hand-written reverse pass of the modReLU recurrence against autodiff of the
  # same loop written with `rnn.modrelu` on complex numbers; biases straddle -|z|.
  k = jax.random.split(jax.random.key(0), 5)
  L, B, n = 9, 3, 4
  w = jax.random.normal(k[0], (2 * n, 2 * n)) / math.sqrt(2 * n) * 1.3
  h0 = jax.random.normal(k[1], (B, 2 * n))
  p = jax.random.normal(k[2], (L, B, 2 * n))
  bias = jnp.array([-0.8, -0.1, 0.0, 0.3])
  weights = jax.random.normal(k[3], (L, B, 2 * n))

  def reference(w, h0, p, bias):
    def body(h, p_t):
      a = h @ w + p_t
      z = rnn.modrelu(a[:, :n] + 1j * a[:, n:], bias)
      h = jnp.concatenate([jnp.real(z), jnp.imag(z)], -1)
      return h, h
    return jax.lax.scan(body, h0, p)[1]

  loss = lambda fn, *args: jnp.sum(jnp.sin(fn(*args)) * weights)
  ours_fn = lambda *a: rnn._modrelu_recurrence(*a, 1)
  np.testing.assert_allclose(ours_fn(w, h0, p, bias), reference(w, h0, p, bias), atol=1e-5)
  ours = jax.grad(lambda *a: loss(ours_fn, *a), argnums=(0, 1, 2, 3))(w, h0, p, bias)
  ref = jax.grad(lambda *a: loss(reference, *a), argnums=(0, 1, 2, 3))(w, h0, p, bias)
  for a, b in zip(ours, ref):
    assert float(jnp.linalg.norm(a - b) / jnp.linalg.norm(b)) < 1e-4
