"""Flax NNX layers: isometry / co-isometry, the linen layers' maths, real pairs, bias,
float64, minimal parameter counts, training with nnx.Optimizer, and bad input.

Compile-bound: layers are built under `nnx.jit` or `nnx.eval_shape` where their draws
do not matter (built eagerly, every primitive of their initializers compiles on its
own), and the checks run in NumPy.
"""

import inspect

from flax import nnx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import lie_unitary as lu
from lie_unitary import nnx as lnnx

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")


def _optimizer(model, tx):
  # `wrt` is required from flax 0.11 on and accepted (with this default) by 0.10.
  return nnx.Optimizer(model, tx, wrt=nnx.Param)


def _update(optimizer, model, grads):
  # flax ≥ 0.11: update(model, grads); flax 0.10: update(grads) (the optimizer holds the model).
  if len(inspect.signature(optimizer.update).parameters) >= 2:
    optimizer.update(model, grads)
  else:
    optimizer.update(grads)


def _num_params(module):
  return sum(leaf.size for leaf in jax.tree.leaves(nnx.state(module, nnx.Param)))


def _apply(module, *args, method="__call__"):
  """Runs a method of `module` under jax.jit via split/merge (the same on flax 0.10 and 0.12)."""
  graphdef, state = nnx.split(module)
  return jax.jit(lambda state, *a: getattr(nnx.merge(graphdef, state), method)(*a))(state, *args)


def _complex(seed, shape):
  rng = np.random.default_rng(seed)
  return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def _numpy_normal(seed):
  """An initializer drawing N(0, 1) in NumPy (no per-shape compile of jax.random)."""
  rng = np.random.default_rng(seed)
  return lambda key, shape, dtype: jnp.asarray(rng.standard_normal(shape), dtype)


# (n, k): minimal counts 2nk - min(n,k)² (complex), nk - m(m+1)/2 (real), by hand.
@pytest.mark.parametrize("shape,num_u,num_o", [((3, 5), 21, 9), ((5, 3), 21, 9),
                                               ((4, 4), 16, 6)])
def test_rectangular_layers(shape, num_u, num_o):
  n, k = shape
  x = _complex(n * 10 + k, (2, 3, n))
  unitary, pairs = (lnnx.UnitaryLinear(n, k, rngs=nnx.Rngs(0), real_pairs=real_pairs,
                                       use_bias=True, lambda_init=_numpy_normal(1),
                                       bias_init=_numpy_normal(2))
                    for real_pairs in (False, True))                  # the same draws
  orthogonal = lnnx.OrthogonalLinear(n, k, rngs=nnx.Rngs(1), use_bias=True,
                                     lambda_init=_numpy_normal(3), bias_init=_numpy_normal(4))
  assert unitary.lam[...].shape == (num_u,) and unitary.bias[...].shape == (2 * k,)
  assert orthogonal.mu[...].shape == (num_o,) and orthogonal.bias[...].shape == (k,)
  assert _num_params(unitary) == num_u + 2 * k and _num_params(orthogonal) == num_o + k

  xr = np.concatenate([x.real, x.imag], axis=-1)
  split = [nnx.split(m) for m in (unitary, pairs, orthogonal)]

  @jax.jit  # one compile per shape
  def run(states):
    u, p, o = (nnx.merge(graphdef, state) for (graphdef, _), state in zip(split, states))
    linen_w = lu.UnitaryLinear(k).apply({"params": {"lam": u.lam[...]}}, n, method="matrix")
    square = ((u.unitary(), lu.unitary_from_lambdas(u.lam[...]),
               o.orthogonal(), lu.orthogonal_from_lambdas(o.mu[...])) if k == n else ())
    return u(x), p(xr), u.matrix(), linen_w, o(x.real), o.matrix(), square

  y, yr, wu, linen_w, yo, wo, square = jax.tree.map(
      np.asarray, run([state for _, state in split]))
  assert wu.shape == wo.shape == (k, n)
  for w in (wu, wo):   # isometry (k ≥ n) or co-isometry (k < n)
    gram, m = (np.conj(w.T) @ w, n) if k >= n else (w @ np.conj(w.T), k)
    np.testing.assert_allclose(gram, np.eye(m), atol=2e-6)
  np.testing.assert_allclose(wu, linen_w, atol=1e-6)   # the linen layer's maths
  b = np.asarray(unitary.bias[...])
  np.testing.assert_allclose(y, np.einsum("kn,abn->abk", wu, x) + b[:k] + 1j * b[k:], atol=1e-5)
  np.testing.assert_allclose(yr, np.concatenate([y.real, y.imag], axis=-1), atol=1e-5)
  np.testing.assert_allclose(
      yo, np.einsum("kn,abn->abk", wo, np.real(x)) + np.asarray(orthogonal.bias[...]), atol=1e-5)
  if k == n:   # the square methods: U(λ), R(μ)
    np.testing.assert_allclose(square[0], square[1], atol=1e-6)
    np.testing.assert_allclose(square[2], square[3], atol=1e-6)


def test_float64_parameters_give_complex128(x64):
  @nnx.jit
  def build():
    layer = lnnx.UnitaryLinear(5, 3, rngs=nnx.Rngs(2), param_dtype=jnp.float64)
    return layer, layer.matrix()

  layer, w = build()
  assert layer.lam[...].dtype == jnp.float64 and layer.bias is None
  assert w.dtype == jnp.complex128
  w = np.asarray(w)
  np.testing.assert_allclose(w @ np.conj(w.T), np.eye(3), atol=1e-12)


class _Regressor(nnx.Module):
  """Real 6 -> 4 (orthogonal co-isometry) -> tanh -> 2 -> 3 complex (unitary isometry on
  real pairs) -> a real readout."""

  def __init__(self, rngs):
    self.orthogonal = lnnx.OrthogonalLinear(6, 4, rngs=rngs, use_bias=True)
    self.unitary = lnnx.UnitaryLinear(2, 3, rngs=rngs, real_pairs=True, use_bias=True)
    self.readout = nnx.Linear(6, 1, rngs=rngs)

  def __call__(self, x):
    return self.readout(self.unitary(jnp.tanh(self.orthogonal(x))))[..., 0]


def test_rectangular_layers_train_with_nnx_optimizer():
  x = np.random.default_rng(13).standard_normal((64, 6)).astype(np.float32)

  @nnx.jit
  def build():  # a teacher and its output (the target is reachable), and a student
    return _Regressor(nnx.Rngs(99))(x), _Regressor(nnx.Rngs(14))

  y, model = build()
  mu0, lam0 = np.asarray(model.orthogonal.mu[...]), np.asarray(model.unitary.lam[...])
  optimizer = _optimizer(model, optax.adam(0.05))

  @nnx.jit
  def step(model, optimizer):
    loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(x) - y) ** 2))(model)
    _update(optimizer, model, grads)
    return loss

  losses = [float(step(model, optimizer)) for _ in range(50)]
  final = float(np.mean((np.asarray(_apply(model, x)) - np.asarray(y)) ** 2))
  assert final < losses[0] / 10, (losses[0], final)
  assert not np.allclose(model.orthogonal.mu[...], mu0)
  assert not np.allclose(model.unitary.lam[...], lam0)
  report = lu.isometry_report(_apply(model.orthogonal, method="matrix"))
  assert report.kind == "co-isometry" and report.error < 1e-5


def test_wrong_input_raises():
  rngs = nnx.Rngs(0)
  with pytest.raises(ValueError, match="in_features must be an integer ≥ 1"):
    lnnx.UnitaryLinear(0, 3, rngs=rngs)
  with pytest.raises(ValueError, match="out_features must be an integer ≥ 1"):
    lnnx.OrthogonalLinear(3, 0, rngs=rngs)
  # The input checks run in Python: abstract layers (`nnx.eval_shape`) reach them.
  unitary, pairs, orthogonal = nnx.eval_shape(lambda: (
      lnnx.UnitaryLinear(3, 2, rngs=nnx.Rngs(0)),
      lnnx.UnitaryLinear(3, 2, rngs=nnx.Rngs(0), real_pairs=True),
      lnnx.OrthogonalLinear(3, 2, rngs=nnx.Rngs(0))))
  ones = lambda n, dtype=np.float32: np.ones((n,), dtype)
  with pytest.raises(ValueError, match="real_pairs=True"):
    unitary(ones(3))
  with pytest.raises(ValueError, match=r"complex \(\.\.\., 3\)"):
    unitary(ones(4, np.complex64))
  with pytest.raises(ValueError, match="use matrix"):
    unitary.unitary()
  with pytest.raises(ValueError, match=r"REAL input \(\.\.\., 2n\)"):
    pairs(ones(5))
  with pytest.raises(ValueError, match=r"real \(\.\.\., 6\)"):
    pairs(ones(4))
  with pytest.raises(ValueError, match="OrthogonalLinear expects real"):
    orthogonal(ones(3, np.complex64))
  with pytest.raises(ValueError, match=r"\(\.\.\., 3\)"):
    orthogonal(ones(2))
  with pytest.raises(ValueError, match="use matrix"):
    orthogonal.orthogonal()


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_parameters_raise(dtype):
  expected = rf"param_dtype must be float32 or float64; got {jnp.dtype(dtype).name}"
  for out_features in (3, 5):
    for layer in (lnnx.UnitaryLinear, lnnx.OrthogonalLinear):
      with pytest.raises(ValueError, match=expected):
        layer(3, out_features, rngs=nnx.Rngs(0), param_dtype=dtype)


@pytest.mark.parametrize("n,k", [(6, 2), (3, 5)])
def test_as_linear_applies_the_same_map(n, k):
  """`as_linear` (an nnx.Linear holding the weight formed once) gives each layer's output:
  orthogonal, complex and real-pair unitary, with bias; built and applied under jit."""
  x = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32)
  xc = _complex(k, (3, n))
  xr = np.concatenate([xc.real, xc.imag], axis=-1)
  kw = dict(use_bias=True, bias_init=_numpy_normal(1), lambda_init=_numpy_normal(2))
  cases = ((lnnx.OrthogonalLinear(n, k, rngs=nnx.Rngs(0), **kw), x),
           (lnnx.UnitaryLinear(n, k, rngs=nnx.Rngs(0), **kw), xc),
           (lnnx.UnitaryLinear(n, k, rngs=nnx.Rngs(0), real_pairs=True, **kw), xr))
  for layer, inputs in cases:
    graphdef, state = nnx.split(layer)

    @jax.jit
    def run(state, inputs, graphdef=graphdef):
      layer = nnx.merge(graphdef, state)
      linear = layer.as_linear()
      return layer(inputs), linear(inputs), linear.kernel[...]

    y, dense, kernel = map(np.asarray, run(state, inputs))
    assert kernel.shape == (inputs.shape[-1], y.shape[-1])
    assert dense.dtype == y.dtype
    np.testing.assert_allclose(dense, y, atol=1e-5)


def test_a_bad_rngs_or_real_pairs_is_named():
  for layer in (lnnx.UnitaryLinear, lnnx.OrthogonalLinear):
    for rngs in (None, 0):  # an AttributeError ('NoneType' has no 'params') before
      with pytest.raises(ValueError, match=f"{layer.__name__} draws its parameters from rngs"):
        layer(2, 2, rngs=rngs)
  with pytest.raises(ValueError, match="real_pairs must be a bool; got 'no'"):
    lnnx.UnitaryLinear(2, 2, rngs=nnx.Rngs(0), real_pairs="no")
  with pytest.raises(ValueError, match="real_pairs must be a bool; got 'no'"):
    jax.eval_shape(lu.UnitaryLinear(2, real_pairs="no").init, jax.random.key(0),
                   jax.ShapeDtypeStruct((1, 4), jnp.float32))
