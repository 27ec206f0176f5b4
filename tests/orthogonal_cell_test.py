"""Tests of the expRNN orthogonal RNN cell against numpy/scipy references written here.

Compile-bound: each test runs its model work as one `jax.jit` program (run eagerly,
every primitive compiles on its own), and the tests of the maths draw inputs and
parameters in numpy, so that only the tests of the initialisation compile `init`.
"""

import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.linalg

from lie_unitary import nn as lnn

pytestmark = pytest.mark.usefixtures("fast_compiles")


def _skew(mu, n):
  """A(μ) in numpy: +μ_k at the k-th (r, s), r < s row-major, and -μ_k at (s, r)."""
  a = np.zeros((n, n))
  rows, cols = np.triu_indices(n, 1)
  a[rows, cols] = mu
  a[cols, rows] = -np.asarray(mu)
  return a


def _modrelu(z, b):
  return np.sign(z) * np.maximum(np.abs(z) + b, 0.0)


def _numpy_states(cell_params, x_BxLxD):
  """h_t = modReLU(W h_{t-1} + V x_t, b) from h_0 = 0, W = scipy expm(A(μ)): (B, L, n)."""
  mu = np.asarray(cell_params["mu"], np.float64)
  n = cell_params["modrelu_bias"].shape[0]
  w = scipy.linalg.expm(_skew(mu, n))
  v = np.asarray(cell_params["v"]["kernel"], np.float64)  # (D, n)
  b = np.asarray(cell_params["modrelu_bias"], np.float64)
  x = np.asarray(x_BxLxD, np.float64)
  h = np.zeros((x.shape[0], n))
  states = []
  for t in range(x.shape[1]):
    h = _modrelu(h @ w.T + x[:, t] @ v, b)  # W h for each row h
    states.append(h)
  return np.stack(states, 1)


def _keys(*seeds):
  """PRNG keys to pass into a jitted test body (made once, outside: no compile each)."""
  return tuple(jax.random.key(seed) for seed in seeds)


def _random_params(n, d, seed, dtype=np.float32):
  """Params of `OrthogonalRNNCell(n)` on D = d inputs, drawn in numpy (nothing to compile):
  μ ~ N(0, 1) (a W far from the block init), V ~ N(0, 2 / D) and b ~ U(-0.01, 0.01) as
  the init draws them."""
  rng = np.random.default_rng(seed)
  cast = lambda a: np.asarray(a, dtype)
  return {"params": {"mu": cast(rng.standard_normal(n * (n - 1) // 2)),
                     "modrelu_bias": cast(rng.uniform(-0.01, 0.01, n)),
                     "v": {"kernel": cast(rng.standard_normal((d, n)) * math.sqrt(2 / d))}}}


def _random_model(model, batch, length, d, seed, dtype=np.float32):
  """Inputs x (batch, length, d) ~ N(0, 1) and params of `model` (a SequenceModel of an
  `OrthogonalRNNCell`) drawn in numpy: the cell's as `_random_params`, the readout's
  N(0, 1 / n); the tree and shapes are checked against `init`'s, traced only (nothing
  compiles), and each leaf takes `init`'s dtype."""
  n, k = model.cell.features, model.num_outputs
  rng = np.random.default_rng(seed)
  x = rng.standard_normal((batch, length, d)).astype(dtype)
  params = {"params": {"cell": _random_params(n, d, seed + 1, dtype)["params"],
                       "readout": {"kernel": (rng.standard_normal((n, k)) / math.sqrt(n)).astype(
                           dtype), "bias": rng.standard_normal(k).astype(dtype)}}}
  expected = jax.eval_shape(model.init, jax.random.key(0), x)
  assert jax.tree.map(np.shape, params) == jax.tree.map(np.shape, expected)
  return x, jax.tree.map(lambda a, e: a.astype(e.dtype), params, expected)


@pytest.mark.parametrize("n", [2, 5, 16])  # 16: "auto" takes Padé on CPU, eigh below
def test_w_is_special_orthogonal_and_the_expm_of_a(n):
  cell = lnn.OrthogonalRNNCell(n)
  params = _random_params(n, 3, n)
  w, transition = jax.jit(lambda params: (cell.apply(params, method=lambda c: c.orthogonal()),
                                          cell.apply(params, method=lambda c: c.transition())))(
                                              params)
  w = np.asarray(w, np.float64)
  assert w.shape == (n, n)
  np.testing.assert_allclose(w.T @ w, np.eye(n), atol=2e-5)
  np.testing.assert_allclose(np.linalg.det(w), 1.0, atol=1e-4)
  ref = scipy.linalg.expm(_skew(np.asarray(params["params"]["mu"], np.float64), n))
  np.testing.assert_allclose(w, ref, atol=2e-5)
  np.testing.assert_array_equal(transition, w.T.astype(np.float32))


@pytest.mark.parametrize("init", ["cayley", "henaff"])
@pytest.mark.parametrize("n", [6, 7])
def test_init_is_block_diagonal_with_the_documented_angles(init, n):
  cell = lnn.OrthogonalRNNCell(n, skew_init=init)

  @jax.jit
  def run(key):
    params = cell.init(key, jnp.zeros((1, n)), jnp.zeros((1, 2)))["params"]
    return params, cell.apply({"params": params}, method=lambda c: c.orthogonal())

  params, w = run(jax.random.key(3))
  a = _skew(np.asarray(params["mu"], np.float64), n)
  m = n // 2
  angles = a[2 * np.arange(m), 2 * np.arange(m) + 1]
  block = np.zeros((n, n))
  block[2 * np.arange(m), 2 * np.arange(m) + 1] = angles
  np.testing.assert_array_equal(a, block - block.T)  # odd n: last row and column zero
  if init == "cayley":
    assert np.all((angles > -1.0) & (angles <= 0.0))  # -tan(u/2), u in (0, π/2)
  else:
    assert np.all(np.abs(angles) <= math.pi)
  # W rotates plane (2i, 2i+1) by a_i: eigenphases ±a_i (and 0 for odd n).
  w = np.asarray(w)
  phases = np.sort(np.angle(np.linalg.eigvals(w)))
  expected = np.sort(np.concatenate([angles, -angles, np.zeros(n % 2)]))
  np.testing.assert_allclose(phases, expected, atol=1e-5)


@pytest.mark.parametrize("init", ["cayley", "henaff"])
def test_init_angles_follow_the_documented_distributions(init):
  import scipy.stats  # here: its import costs every pytest worker seconds at collection
  n = 16
  mus = jax.jit(lambda key: jax.vmap(
      lambda k: lnn.block_rotation_init(init)(k, (n * (n - 1) // 2,)))(
          jax.random.split(key, 250)))(jax.random.key(11))
  a = np.stack([_skew(mu, n) for mu in np.asarray(mus, np.float64)])
  angles = a[:, 2 * np.arange(n // 2), 2 * np.arange(n // 2) + 1].ravel()  # 2000 draws
  if init == "cayley":
    u = 2 * np.arctan(-angles)  # a = -tan(u/2), u ~ U(0, π/2)
    cdf = scipy.stats.uniform(0.0, math.pi / 2).cdf
  else:
    u = angles  # a ~ U(-π, π)
    cdf = scipy.stats.uniform(-math.pi, 2 * math.pi).cdf
  assert scipy.stats.kstest(u, cdf).pvalue > 1e-3


def test_input_kernel_is_untruncated_he_normal_and_bias_small():
  n, d = 16, 64
  cell = lnn.OrthogonalRNNCell(n)
  params = jax.jit(cell.init)(jax.random.key(0), np.zeros((1, n), np.float32),
                             np.zeros((1, d), np.float32))["params"]
  v = np.asarray(params["v"]["kernel"])
  assert v.shape == (d, n) and "bias" not in params["v"]
  z = v / math.sqrt(2.0 / d)  # kaiming_normal_(nonlinearity="relu"), fan_in = D
  assert 0.9 < z.std() < 1.1
  assert np.abs(z).max() > 2.5  # flax's he_normal truncates at 2 standard deviations
  b = np.asarray(params["modrelu_bias"])
  assert b.shape == (n,) and np.all(np.abs(b) <= 0.01) and np.ptp(b) > 0


def test_one_step_is_the_numpy_recurrence():
  n, d = 7, 3
  cell = lnn.OrthogonalRNNCell(n)

  params = _random_params(n, d, 1)
  rng = np.random.default_rng(2)
  h, x = (rng.standard_normal(shape).astype(np.float32) for shape in ((4, n), (4, d)))
  new, out, carry = jax.jit(lambda params, h, x: (
      *cell.apply(params, h, x), cell.initialize_carry(None, x.shape)))(params, h, x)
  p = params["params"]
  w = scipy.linalg.expm(_skew(np.asarray(p["mu"], np.float64), n))
  ref = _modrelu(np.asarray(h) @ w.T + np.asarray(x) @ np.asarray(p["v"]["kernel"]),
                 np.asarray(p["modrelu_bias"]))
  np.testing.assert_allclose(new, ref, atol=1e-5)
  np.testing.assert_array_equal(new, out)
  np.testing.assert_array_equal(carry, np.zeros((4, n)))


def test_exprnn_parameter_carries_over_as_minus_its_upper_triangle():
  # expRNN: h_t = modrelu(h @ expm(A_eff) + x @ Vᵀ), A_eff = triu(A, 1) - triu(A, 1)ᵀ.
  n, d = 6, 2
  cell = lnn.OrthogonalRNNCell(n)
  a = np.random.RandomState(0).normal(size=(n, n))  # a raw parameter: any lower triangle
  upper = np.triu(a, 1)
  rows, cols = np.triu_indices(n, 1)
  params = _random_params(n, d, 0)
  params["params"]["mu"] = np.asarray(-a[rows, cols], np.float32)
  rng = np.random.default_rng(1)
  h, x = (rng.standard_normal(shape).astype(np.float32) for shape in ((3, n), (3, d)))
  new = jax.jit(cell.apply)(params, h, x)[0]
  p = params["params"]
  ref = _modrelu(np.asarray(h) @ scipy.linalg.expm(upper - upper.T)
                 + np.asarray(x) @ np.asarray(p["v"]["kernel"]), np.asarray(p["modrelu_bias"]))
  np.testing.assert_allclose(new, ref, atol=2e-5)


@pytest.mark.parametrize("readout", ["last", "all"])
def test_sequence_model_is_the_numpy_loop(readout):
  n, d, k, length = 6, 2, 3, 9
  model = lnn.SequenceModel(lnn.OrthogonalRNNCell(n, skew_init="henaff"), k, readout)

  x, params = _random_model(model, 3, length, d, 0)
  out = jax.jit(model.apply)(params, x)
  p = params["params"]
  hs = _numpy_states(p["cell"], x)
  logits = hs @ np.asarray(p["readout"]["kernel"]) + np.asarray(p["readout"]["bias"])
  np.testing.assert_allclose(out, logits[:, -1] if readout == "last" else logits, atol=2e-5)


def test_gradients_match_central_finite_differences(x64):
  n, d, k, length = 5, 2, 2, 6
  cell = lnn.OrthogonalRNNCell(n, param_dtype=jnp.float64)
  model = lnn.SequenceModel(cell, k, "all")

  x, params = _random_model(model, 3, length, d, 0, np.float64)  # μ far from the block init
  weights = np.random.default_rng(3).standard_normal((3, length, k))
  # Biases that switch some units off (modReLU's zero branch).
  cp = dict(params["params"]["cell"])
  cp["modrelu_bias"] = np.array([-0.6, 0.3, -0.2, 0.05, -1.0])
  params = {"params": {**params["params"], "cell": cp}}
  loss = jax.jit(lambda p: jnp.sum(model.apply(p, x) * weights))

  # Keep every pre-activation away from modReLU's kinks (|z| = -b and z = 0).
  pre = _numpy_states(cp, x)  # states; recompute the pre-activations below
  w = scipy.linalg.expm(_skew(np.asarray(cp["mu"]), n))
  prev = np.concatenate([np.zeros((3, 1, n)), pre[:, :-1]], 1)
  z = prev @ w.T + np.asarray(x) @ np.asarray(cp["v"]["kernel"])
  assert np.min(np.abs(np.abs(z) + np.asarray(cp["modrelu_bias"]))) > 1e-3
  assert np.min(np.abs(z)) > 1e-3
  assert 0 < np.mean(pre == 0) < 1  # both branches of modReLU are exercised

  grads = jax.jit(jax.grad(loss))(params)["params"]["cell"]
  eps = 1e-6
  for path in (("mu",), ("v", "kernel"), ("modrelu_bias",)):
    leaf = cp[path[0]] if len(path) == 1 else cp[path[0]][path[1]]
    grad = grads[path[0]] if len(path) == 1 else grads[path[0]][path[1]]
    fd = np.zeros(leaf.shape)
    for idx in np.ndindex(leaf.shape):
      def shifted(sign):
        new = leaf.copy()  # numpy: one compiled loss for every shift
        new[idx] += sign * eps
        c = dict(cp)
        c[path[0]] = new if len(path) == 1 else {**cp[path[0]], path[1]: new}
        return float(loss({"params": {**params["params"], "cell": c}}))
      fd[idx] = (shifted(1.0) - shifted(-1.0)) / (2 * eps)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-8, err_msg=str(path))


def test_sequence_model_under_vmap_over_params_and_jit():
  n, d, k, length, replicates = 4, 2, 3, 5, 3
  model = lnn.SequenceModel(lnn.OrthogonalRNNCell(n), k)
  x, keys = jax.jit(lambda k0, k1: (jax.random.normal(k0, (2, length, d)),
                                    jax.random.split(k1, replicates)))(*_keys(0, 1))
  stacked = jax.jit(jax.vmap(lambda key: model.init(key, x)))(keys)
  out = np.asarray(jax.jit(jax.vmap(model.apply, in_axes=(0, None)))(stacked, x))
  assert out.shape == (replicates, 2, k)
  apply = jax.jit(model.apply)  # one replicate at a time: the reference
  for r in range(replicates):
    one = jax.tree.map(lambda leaf: np.asarray(leaf)[r], stacked)
    np.testing.assert_allclose(out[r], apply(one, x), atol=1e-5)


def _num_leaves(params):
  return sum(leaf.size for leaf in jax.tree.leaves(params))


@pytest.mark.parametrize("n, d, k", [(2, 1, 1), (7, 3, 4)])
def test_parameter_counts(n, d, k):
  # Shapes only: `jax.eval_shape` runs init's Python without compiling anything.
  x = jax.ShapeDtypeStruct((1, 2, d), jnp.float32)
  key = jax.random.key(0)
  model = lnn.SequenceModel(lnn.OrthogonalRNNCell(n), k)
  params = jax.eval_shape(model.init, key, x)["params"]
  assert _num_leaves(params) == lnn.orthogonal_rnn_num_params(n, d, k)
  assert lnn.orthogonal_rnn_num_params(n, d, k) == n * (n - 1) // 2 + n * d + n + n * k + k
  # λ (n²) is U(n)'s dimension; a rebased cell's base is a variable, not a parameter.
  for activation, rebased in (("relu", False), ("modrelu", True)):
    cell = lnn.GURNNCell(n, activation=activation, h0="zeros", rebased=rebased)
    variables = jax.eval_shape(lnn.SequenceModel(cell, k).init, key, x)
    assert _num_leaves(variables["params"]) == lnn.gurnn_num_params(n, d, k, activation)
  assert lnn.gurnn_num_params(n, d, k) == n * n + 2 * n * d + 2 * n + 2 * n * k + k


def test_bad_arguments_raise():
  # The checks run in init's Python: `jax.eval_shape` reaches them without compiling.
  x = jax.ShapeDtypeStruct((1, 2, 2), jnp.float32)
  key = jax.random.key(0)
  for cell in (lnn.OrthogonalRNNCell(1), lnn.OrthogonalRNNCell(0),
               lnn.OrthogonalRNNCell(4, skew_init="haar"),
               lnn.OrthogonalRNNCell(4, expm_method="qr")):
    with pytest.raises(ValueError):
      jax.eval_shape(lnn.SequenceModel(cell, 1).init, key, x)
  with pytest.raises(ValueError, match="unknown init"):
    lnn.block_rotation_init("haar")
  with pytest.raises(ValueError):
    jax.eval_shape(lambda k: lnn.block_rotation_init()(k, (4,)), key)  # not n(n-1)/2
  with pytest.raises(ValueError):
    lnn.orthogonal_rnn_num_params(1, 2, 3)
  with pytest.raises(ValueError):
    lnn.gurnn_num_params(4, 0, 3)
  with pytest.raises(ValueError, match=r"'sigmoid'; choose from .*'modrelu'"):
    lnn.gurnn_num_params(4, 2, 3, "sigmoid")  # the list named the elementwise ones only
  with pytest.raises(ValueError, match=r"'sigmoid'; choose from .*'modrelu'"):
    cell = lnn.GURNNCell(4, activation="sigmoid", h0="zeros")
    jax.eval_shape(lnn.SequenceModel(cell, 1).init, key, x)
  with pytest.raises(ValueError, match="param_dtype must be float32 or float64"):  # from expm
    jax.eval_shape(lnn.SequenceModel(lnn.OrthogonalRNNCell(4, param_dtype=jnp.float16),
                                     1).init, key, x)


def test_labels_select_exactly_mu_for_a_tenth_of_the_learning_rate():
  n, d, k = 4, 2, 3
  model = lnn.SequenceModel(lnn.OrthogonalRNNCell(n), k)
  x, params = _random_model(model, 2, 5, d, 0)
  labels = lnn.orthogonal_labels(params)
  flat = jax.tree_util.tree_flatten_with_path(labels)[0]
  orthogonal = [jax.tree_util.keystr(path) for path, label in flat if label == "orthogonal"]
  assert orthogonal == ["['params']['cell']['mu']"]
  assert {label for _, label in flat} == {"orthogonal", "rest"}
  lr = 0.1
  opt = optax.multi_transform({"orthogonal": optax.sgd(lr / 10), "rest": optax.sgd(lr)},
                              lnn.orthogonal_labels)

  @jax.jit
  def run(params):
    grads = jax.grad(lambda p: jnp.sum(model.apply(p, x) ** 2))(params)
    return grads, opt.update(grads, opt.init(params), params)[0]

  grads, updates = jax.tree.map(np.asarray, run(params))
  for (path, u), g, label in zip(jax.tree_util.tree_flatten_with_path(updates)[0],
                                 jax.tree.leaves(grads), jax.tree.leaves(labels)):
    scale = lr / 10 if label == "orthogonal" else lr
    np.testing.assert_allclose(u, -scale * g, rtol=1e-6, err_msg=jax.tree_util.keystr(path))


def test_flax_rnn_of_the_cell_equals_the_fast_path():
  n, d, length = 5, 2, 4
  cell = lnn.OrthogonalRNNCell(n)
  model = lnn.SequenceModel(cell, 1, "all")

  x, params = _random_model(model, 2, length, d, 0)
  params = params["params"]
  states = jax.jit(lambda cell_params, x: nn.RNN(cell).apply({"params": {"cell": cell_params}},
                                                             x))(params["cell"], x)
  np.testing.assert_allclose(states, _numpy_states(params["cell"], x), atol=2e-5)
