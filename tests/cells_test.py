"""Tests of the recurrent cells (paper §4): each step against its complex-number formula."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lie_unitary as lu
from lie_unitary import nn as lnn

pytestmark = pytest.mark.usefixtures("fast_compiles")


def test_gurnn_step_is_the_complex_recurrence():
  n, D, beta = 5, 3, 1.4
  cell = lnn.GURNNCell(n, beta=beta, activation="tanh")
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
  cell = lnn.URNNCell(n, permutation_seed=3)
  h = jax.random.normal(jax.random.key(0), (4, 2 * n))
  x = jax.random.normal(jax.random.key(1), (4, D))
  params = cell.init(jax.random.key(2), h, x)
  new, _ = cell.apply(params, h, x)
  p = params["params"]
  perm = np.random.RandomState(3).permutation(n)
  u = lu.arjovsky_unitary(p["angles"], p["reflections_re"], p["reflections_im"], perm)
  v = p["v"]["kernel"][:, :n] + 1j * p["v"]["kernel"][:, n:]
  z = (h[:, :n] + 1j * h[:, n:]) @ u.T + x @ v
  ref = lnn.modrelu(z, p["bias"])
  np.testing.assert_allclose(new, jnp.concatenate([jnp.real(ref), jnp.imag(ref)], -1),
                             atol=1e-5)
  assert np.all(np.abs(p["bias"]) <= 0.01)
  # modReLU: zero where |z| + b < 0, else the phase of z kept and the modulus shifted.
  z = jnp.array([0.3 + 0.4j, 0.001 + 0j])
  out = lnn.modrelu(z, jnp.array([-0.1, -0.1]), eps=0.0)
  np.testing.assert_allclose(out, [0.4 / 0.5 * (0.3 + 0.4j), 0.0], atol=1e-6)


def test_irnn_init():
  cell = lnn.SimpleRNNCell.irnn(30)
  params = cell.init(jax.random.key(0), jnp.zeros((1, 30)), jnp.zeros((1, 2)))["params"]
  np.testing.assert_array_equal(params["w"], np.eye(30))
  assert 0.5e-3 < float(jnp.std(params["v"]["kernel"])) < 2e-3


def test_input_kernel_halves_are_glorot_for_d_by_n():
  # V = [V_re | V_im] (D, 2n): each half drawn as a Glorot-uniform (D, n) matrix.
  n, D = 50, 3
  cell = lnn.GURNNCell(n)
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
  cell = lnn.GURNNCell(n, activation="modrelu")
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
  ref = lnn.modrelu(z, p["modrelu_bias"])
  np.testing.assert_allclose(new, jnp.concatenate([jnp.real(ref), jnp.imag(ref)], -1),
                             atol=1e-5)


def test_diagonal_phases_init_gives_a_diagonal_unitary():
  n = 6
  lam = lnn.diagonal_phases_init()(jax.random.key(0), (n * n,))
  theta = lam[:n]
  assert np.all(np.abs(theta) <= np.pi) and np.ptp(theta) > 1.0
  np.testing.assert_allclose(lu.unitary_from_lambdas(lam), np.diag(np.exp(1j * theta)),
                             atol=1e-5)
  with pytest.raises(ValueError, match="n²"):
    lnn.diagonal_phases_init()(jax.random.key(0), (7,))


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_gurnn_half_precision_parameters_raise(dtype):
  cell = lnn.GURNNCell(3, param_dtype=dtype)
  h, x = jnp.zeros((2, 6), dtype), jnp.zeros((2, 4), dtype)
  with pytest.raises(ValueError, match=rf"float32 or float64; got {jnp.dtype(dtype).name}"):
    cell.init(jax.random.key(0), h, x)
