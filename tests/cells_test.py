"""Tests of the recurrent cells (paper §4): each step against its complex-number formula.

Each test runs its model work as one `jax.jit` program (run eagerly, every primitive
compiles on its own, and compiling is most of the time); the formulas are numpy.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lie_unitary as lu
from lie_unitary import nn as lnn

pytestmark = pytest.mark.usefixtures("fast_compiles")


def _keys(*seeds):
  """PRNG keys to pass into a jitted test body (made once, outside: no compile each)."""
  return tuple(jax.random.key(seed) for seed in seeds)


def _np_modrelu(z, b, eps=1e-5):
  """`lnn.modrelu` in numpy: relu(r + b) z / r, r = sqrt(|z|² + eps), 0 at z = 0."""
  r = np.sqrt(np.abs(z) ** 2 + eps)
  return np.where(z != 0, np.maximum(r + b, 0) / r, 0) * z


def _pairs(z):
  """[Re z, Im z] on the last axis."""
  return np.concatenate([z.real, z.imag], -1)


def _run_cell(cell, n, d, method=None, init=True):
  """One jitted program: h (4, 2n), x (4, D), the cell's variables, its step, and
  `method(cell)` of those variables (or None): numpy arrays. The variables come from
  `cell.init`, or with init=False are drawn in numpy on init's tree (N(0, 1 / m) for
  (m, ...) matrices, N(0, 1) else: nonzero biases), so that `init` is not compiled."""
  if not init:
    rng = np.random.default_rng(0)
    normal = lambda a, s=1.0: (s * rng.standard_normal(a.shape)).astype(a.dtype)
    h, x = normal(np.zeros((4, 2 * n), np.float32)), normal(np.zeros((4, d), np.float32))
    params = jax.tree.map(lambda a: normal(a, 1 / np.sqrt(a.shape[0]) if a.ndim == 2 else 1),
                          jax.eval_shape(cell.init, jax.random.key(0), h, x))
    extra = (lambda p: None) if method is None else (lambda p: cell.apply(p, method=method))
    return h, x, params, *jax.tree.map(np.asarray, jax.jit(
        lambda p, h, x: (cell.apply(p, h, x), extra(p)))(params, h, x))

  @jax.jit
  def run(keys):
    h = jax.random.normal(keys[0], (4, 2 * n))
    x = jax.random.normal(keys[1], (4, d))
    params = cell.init(keys[2], h, x)
    extra = None if method is None else cell.apply(params, method=method)
    return h, x, params, cell.apply(params, h, x), extra

  return jax.tree.map(np.asarray, run(_keys(0, 1, 2)))


def test_gurnn_step_is_the_complex_recurrence():
  n, D, beta = 5, 3, 1.4
  cell = lnn.GURNNCell(n, beta=beta, activation="tanh")
  h, x, params, (new, out), (u, m) = _run_cell(
      cell, n, D, lambda c: (lu.unitary_from_lambdas(c.lam), c.transition()), init=False)
  p = params["params"]
  hc = h[:, :n] + 1j * h[:, n:]
  uh = beta * hc @ u.T
  v, b = p["v"]["kernel"], p["v"]["bias"]
  pre_re = np.real(uh) + x @ v[:, :n] + b[:n]
  pre_im = np.imag(uh) + x @ v[:, n:] + b[n:]
  np.testing.assert_allclose(new, np.tanh(np.concatenate([pre_re, pre_im], -1)), atol=1e-5)
  np.testing.assert_array_equal(new, out)
  # β = 1: the transition is orthogonal (a unitary matrix as a real block matrix).
  m = m / beta
  np.testing.assert_allclose(m.T @ m, np.eye(2 * n), atol=1e-5)


def test_urnn_step_is_modrelu_of_the_composition():
  n, D = 8, 2
  cell = lnn.URNNCell(n, permutation_seed=3)
  perm = np.random.RandomState(3).permutation(n)
  h, x, params, (new, _), u = _run_cell(
      cell, n, D, lambda c: lu.arjovsky_unitary(c.angles, c.reflections_re,
                                                c.reflections_im, perm))
  p = params["params"]
  v = p["v"]["kernel"][:, :n] + 1j * p["v"]["kernel"][:, n:]
  z = (h[:, :n] + 1j * h[:, n:]) @ u.T + x @ v
  np.testing.assert_allclose(new, _pairs(_np_modrelu(z, p["bias"])), atol=1e-5)
  assert np.all(np.abs(p["bias"]) <= 0.01)
  # modReLU: zero where |z| + b < 0, else the phase of z kept and the modulus shifted.
  z = np.array([0.3 + 0.4j, 0.001 + 0j], np.complex64)
  out = jax.jit(lambda z, b: lnn.modrelu(z, b, eps=0.0))(z, np.array([-0.1, -0.1], np.float32))
  np.testing.assert_allclose(out, [0.4 / 0.5 * (0.3 + 0.4j), 0.0], atol=1e-6)


def test_irnn_init():
  cell = lnn.SimpleRNNCell.irnn(30)
  params = jax.jit(cell.init)(jax.random.key(0), np.zeros((1, 30), np.float32),
                              np.zeros((1, 2), np.float32))["params"]
  np.testing.assert_array_equal(params["w"], np.eye(30))
  assert 0.5e-3 < np.std(np.asarray(params["v"]["kernel"])) < 2e-3


def test_input_kernel_halves_are_glorot_for_d_by_n():
  # V = [V_re | V_im] (D, 2n): each half drawn as a Glorot-uniform (D, n) matrix.
  n, D = 50, 3
  cell = lnn.GURNNCell(n)
  params = jax.jit(cell.init)(jax.random.key(0), np.zeros((1, 2 * n), np.float32),
                              np.zeros((1, D), np.float32))
  v = np.asarray(params["params"]["v"]["kernel"])
  assert v.shape == (D, 2 * n)
  bound = np.sqrt(6 / (D + n))
  for half in (v[:, :n], v[:, n:]):
    assert np.abs(half).max() <= bound
    assert np.abs(half).max() > np.sqrt(6 / (D + 2 * n))  # not the (D, 2n) Glorot scale
  assert not np.allclose(v[:, :n], v[:, n:])


def test_gurnn_modrelu_step_is_modrelu_of_the_complex_recurrence():
  n, D = 5, 3
  cell = lnn.GURNNCell(n, activation="modrelu")
  h, x, params, (new, _), u = _run_cell(cell, n, D, lambda c: lu.unitary_from_lambdas(c.lam))
  p = params["params"]
  assert np.all(np.abs(p["modrelu_bias"]) <= 0.01)
  v, b = p["v"]["kernel"], p["v"]["bias"]
  z = ((h[:, :n] + 1j * h[:, n:]) @ u.T + x @ (v[:, :n] + 1j * v[:, n:])
       + (b[:n] + 1j * b[n:]))
  np.testing.assert_allclose(new, _pairs(_np_modrelu(z, p["modrelu_bias"])), atol=1e-5)


def test_diagonal_phases_init_gives_a_diagonal_unitary():
  n = 6
  lam, u = jax.jit(lambda key: (lambda lam: (lam, lu.unitary_from_lambdas(lam)))(
      lnn.diagonal_phases_init()(key, (n * n,))))(jax.random.key(0))
  theta = np.asarray(lam[:n])
  assert np.all(np.abs(theta) <= np.pi) and np.ptp(theta) > 1.0
  np.testing.assert_allclose(u, np.diag(np.exp(1j * theta)), atol=1e-5)
  with pytest.raises(ValueError, match="n²"):
    lnn.diagonal_phases_init()(jax.random.key(0), (7,))
  with pytest.raises(ValueError, match="need minval ≤ maxval; got minval=1.0, maxval=-1.0"):
    lnn.diagonal_phases_init(1.0, -1.0)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_gurnn_half_precision_parameters_raise(dtype):
  # init's checks run in its Python: `jax.eval_shape` reaches them without compiling.
  h, x = jax.ShapeDtypeStruct((2, 6), dtype), jax.ShapeDtypeStruct((2, 4), dtype)
  for unconstrained in (False, True):  # the free matrix too (not XLA's NotImplementedError)
    cell = lnn.GURNNCell(3, param_dtype=dtype, unconstrained=unconstrained)
    with pytest.raises(ValueError, match=rf"float32 or float64; got {jnp.dtype(dtype).name}"):
      jax.eval_shape(cell.init, jax.random.key(0), h, x)


@pytest.mark.parametrize("kwargs,match", [
    (dict(complex_product="complex"), "complex_product must be one of"),
    (dict(complex_product="gauss"), "needs activation='modrelu'"),
    (dict(complex_product="gauss", activation="modrelu", unconstrained=True), "a free matrix")])
def test_gurnn_complex_product_refused(kwargs, match):
  cell = lnn.GURNNCell(3, **kwargs)
  h, x = jax.ShapeDtypeStruct((2, 6), jnp.float32), jax.ShapeDtypeStruct((2, 4), jnp.float32)
  with pytest.raises(ValueError, match=match):
    jax.eval_shape(cell.init, jax.random.key(0), h, x)


def test_gurnn_complex_product_resolved():
  on_cpu = jax.default_backend() == "cpu"
  assert lnn.GURNNCell(250, activation="modrelu").resolved_complex_product() == (
      "gauss" if on_cpu else "real")
  assert lnn.GURNNCell(249, activation="modrelu").resolved_complex_product() == "real"
  assert lnn.GURNNCell(250, activation="relu").resolved_complex_product() == "real"
  assert lnn.GURNNCell(250, activation="modrelu", unconstrained=True,
                       complex_product="auto").resolved_complex_product() == "real"


@pytest.mark.parametrize("make", [lambda f: lnn.GURNNCell(f), lambda f: lnn.URNNCell(f),
                                  lambda f: lnn.SimpleRNNCell(f)])
def test_cells_refuse_bad_sizes_and_complex_inputs(make):
  size = 8 if isinstance(make(4), (lnn.GURNNCell, lnn.URNNCell)) else 4  # [Re, Im] pairs
  init = lambda cell, x: jax.eval_shape(  # noqa: E731  (checks only: nothing compiles)
      cell.init, jax.random.key(0), jax.ShapeDtypeStruct((2, size), jnp.float32), x)
  real = jax.ShapeDtypeStruct((2, 3), jnp.float32)
  for bad in (0, 2.5, True):
    with pytest.raises(ValueError, match=f"features must be an integer ≥ 1; got {bad}"):
      init(make(bad), real)
  with pytest.raises(ValueError, match="input x must be real; got dtype complex64"):
    init(make(4), jax.ShapeDtypeStruct((2, 3), jnp.complex64))
  for carry in (jax.ShapeDtypeStruct((2, size + 1), jnp.float32),
                jax.ShapeDtypeStruct((2, size), jnp.complex64)):
    with pytest.raises(ValueError, match=f"carry must be real \\(..., {size}\\)"):
      jax.eval_shape(make(4).init, jax.random.key(0), carry, real)
  for batch in ((3,), (1,), ()):  # x's batch axes are (2,): a carry is not broadcast
    with pytest.raises(ValueError, match=re.escape(f"carry's batch axes {batch} must be x's (2,)")):
      jax.eval_shape(make(4).init, jax.random.key(0),
                     jax.ShapeDtypeStruct(batch + (size,), jnp.float32), real)


def test_the_orthogonal_cell_checks_its_carry_as_the_others():
  real = jax.ShapeDtypeStruct((2, 3), jnp.float32)
  for shape, dtype, match in (((2, 4), jnp.complex64, r"carry must be real \(..., 4\)"),
                       ((2, 5), jnp.float32, r"carry must be real \(..., 4\)"),
                       ((1, 4), jnp.float32, r"carry's batch axes \(1,\) must be x's")):
    with pytest.raises(ValueError, match=match):
      jax.eval_shape(lnn.OrthogonalRNNCell(4).init, jax.random.key(0),
                     jax.ShapeDtypeStruct(shape, dtype), real)


@pytest.mark.parametrize("cell, size", [(lnn.URNNCell, 6), (lnn.SimpleRNNCell, 3)])
def test_half_precision_parameters_raise(cell, size):
  with pytest.raises(ValueError, match="param_dtype must be float32 or float64; got float16"):
    jax.eval_shape(cell(3, param_dtype=jnp.float16).init, jax.random.key(0),
                   jax.ShapeDtypeStruct((2, size), jnp.float16),
                   jax.ShapeDtypeStruct((2, 4), jnp.float16))
