"""Flax linen layers: they apply exactly U(λ) (square) or an isometry / co-isometry
(rectangular), once per call, train, and reject wrong input.

Compile-bound: inputs come from NumPy, each test compiles one program for what it
checks (eager calls would compile every primitive), and the checks run in NumPy.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import lie_unitary as lu

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")


def _complex(seed, shape):
  rng = np.random.default_rng(seed)
  return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np.complex64)


def test_unitary_linear_complex_and_real_pairs():
  n = 5
  x = _complex(0, (2, 3, n))
  xr = np.concatenate([x.real, x.imag], axis=-1)
  layer = lu.UnitaryLinear(n)
  pairs = lu.UnitaryLinear(n, real_pairs=True)

  @jax.jit
  def run(key):
    variables = layer.init(key, x)
    lam = variables["params"]["lam"]
    return (lam, lu.unitary_from_lambdas(lam), layer.apply(variables, x),
            pairs.apply(variables, xr), pairs.apply(variables, xi))

  xi = np.arange(-n, n, dtype=np.int32)  # integer pairs are promoted, as OrthogonalLinear's
  lam, u, y, yr, yi = map(np.asarray, run(jax.random.key(1)))
  assert lam.shape == (n * n,) and lam.dtype == np.float32
  np.testing.assert_allclose(y, np.einsum("ij,abj->abi", u, x), atol=1e-5)
  np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)
  np.testing.assert_allclose(yr, np.concatenate([y.real, y.imag], axis=-1), atol=1e-5)
  ui = u @ (xi[:n] + 1j * xi[n:])
  assert yi.dtype == np.float32
  np.testing.assert_allclose(yi, np.concatenate([ui.real, ui.imag]), atol=1e-5)


def test_unitary_linear_zero_init_is_identity():
  layer = lu.UnitaryLinear(4, lambda_init=nn.initializers.zeros)
  x = _complex(2, (4,))
  y = jax.jit(lambda key: layer.apply(layer.init(key, x), x))(jax.random.key(3))
  np.testing.assert_allclose(y, x, atol=1e-6)


def test_one_eigh_per_call():
  layer = lu.UnitaryLinear(6)
  x = _complex(4, (32, 6))
  variables = jax.eval_shape(layer.init, jax.random.key(5), x)   # traced only
  loss = lambda v: jnp.sum(jnp.abs(layer.apply(v, x)) ** 2 * jnp.arange(6)[None, :])
  jaxpr = str(jax.make_jaxpr(jax.value_and_grad(loss))(variables))
  assert jaxpr.count("eigh[") == 1


def test_orthogonal_linear():
  n = 4
  x = np.random.default_rng(6).standard_normal((3, n)).astype(np.float32)
  layer = lu.OrthogonalLinear(n)

  @jax.jit
  def run(key):
    variables = layer.init(key, x)
    return layer.apply(variables, x), lu.orthogonal_from_lambdas(variables["params"]["mu"])

  y, r = map(np.asarray, run(jax.random.key(7)))
  np.testing.assert_allclose(y, x @ r.T, atol=1e-6)
  np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)


def test_square_methods_and_parameter_shapes_are_unchanged():
  x = _complex(8, (4,))
  layer = lu.UnitaryLinear(4)
  orth = lu.OrthogonalLinear(4)

  @jax.jit
  def run(key):
    variables = layer.init(key, x)
    v_orth = orth.init(key, x.real)
    return (layer.apply(variables, method="unitary"),
            lu.unitary_from_lambdas(variables["params"]["lam"]),
            layer.apply(variables, 4, method="matrix"),
            v_orth, orth.apply(v_orth, method="orthogonal"),
            lu.orthogonal_from_lambdas(v_orth["params"]["mu"]))

  u, u_ref, matrix, v_orth, r, r_ref = run(jax.random.key(9))
  np.testing.assert_array_equal(u, u_ref)
  np.testing.assert_array_equal(matrix, u)
  assert jax.tree.map(jnp.shape, v_orth) == {"params": {"mu": (6,)}}
  np.testing.assert_array_equal(r, r_ref)


# (n, k): minimal counts 2nk - min(n,k)² (complex), nk - m(m+1)/2 (real), by hand.
RECTANGULAR = [((3, 5), 21, 9), ((5, 3), 21, 9), ((4, 4), 16, 6)]


def _gram_on_smaller_side(w):
  k, n = w.shape
  return (np.conj(w.T) @ w, n) if k >= n else (w @ np.conj(w.T), k)


@pytest.mark.parametrize("shape,num_u,num_o", RECTANGULAR)
def test_rectangular_layers(shape, num_u, num_o):
  n, k = shape
  rng = np.random.default_rng(n * 10 + k)
  x = (rng.standard_normal((2, 3, n)) + 1j * rng.standard_normal((2, 3, n))).astype(np.complex64)
  xr = np.concatenate([x.real, x.imag], axis=-1)
  normal = nn.initializers.normal(1.0)
  unitary = lu.UnitaryLinear(k, use_bias=True, bias_init=normal)
  pairs = lu.UnitaryLinear(k, real_pairs=True, use_bias=True, bias_init=normal)
  orthogonal = lu.OrthogonalLinear(k, use_bias=True, bias_init=normal)

  @jax.jit  # one compile per shape
  def run(key):
    vu = unitary.init(key, x)
    vo = orthogonal.init(key, x.real)
    q = lu.semi_unitary_from_lambdas(vu["params"]["lam"], max(n, k), min(n, k))
    return (vu, unitary.apply(vu, x), pairs.apply(vu, xr), unitary.apply(vu, n, method="matrix"),
            vo, orthogonal.apply(vo, x.real), orthogonal.apply(vo, n, method="matrix"), q)

  vu, y, yr, wu, vo, yo, wo, q = jax.tree.map(np.asarray, run(jax.random.key(n * 10 + k)))
  assert jax.tree.map(np.shape, vu) == {"params": {"lam": (num_u,), "bias": (2 * k,)}}
  assert jax.tree.map(np.shape, vo) == {"params": {"mu": (num_o,), "bias": (k,)}}
  assert lu.nn.num_unitary_weight_params(n, k) == num_u
  assert lu.nn.num_orthogonal_weight_params(n, k) == num_o
  assert wu.shape == wo.shape == (k, n)
  for w in (wu, wo):   # isometry (k ≥ n) or co-isometry (k < n)
    gram, m = _gram_on_smaller_side(w)
    np.testing.assert_allclose(gram, np.eye(m), atol=2e-6)
  # The documented convention, against the public Stiefel maps.
  np.testing.assert_allclose(wu, q if k >= n else q.T, atol=1e-6)
  b = vu["params"]["bias"][:k] + 1j * vu["params"]["bias"][k:]
  np.testing.assert_allclose(y, np.einsum("kn,abn->abk", wu, x) + b, atol=1e-5)
  np.testing.assert_allclose(yr, np.concatenate([y.real, y.imag], axis=-1), atol=1e-5)
  np.testing.assert_allclose(yo, np.einsum("kn,abn->abk", wo, np.real(x)) + vo["params"]["bias"],
                             atol=1e-5)
  if k >= n:   # an isometry preserves norms
    np.testing.assert_allclose(np.linalg.norm(y - b, axis=-1), np.linalg.norm(x, axis=-1),
                               rtol=1e-5)


def test_float64_parameters_give_complex128(x64):
  layer = lu.UnitaryLinear(5, param_dtype=jnp.float64)
  x = np.ones((3,), np.complex128)

  @jax.jit
  def run(key):
    variables = layer.init(key, x)
    return variables, layer.apply(variables, 3, method="matrix"), layer.apply(variables, x)

  variables, w, y = jax.tree.map(np.asarray, run(jax.random.key(12)))
  assert variables["params"]["lam"].dtype == jnp.float64
  assert w.dtype == y.dtype == jnp.complex128
  np.testing.assert_allclose(np.conj(w.T) @ w, np.eye(3), atol=1e-12)


class _Regressor(nn.Module):
  """Real 6 -> 4 (orthogonal co-isometry) -> tanh -> 2 -> 3 complex (unitary isometry on
  real pairs, 4 -> 6 reals) -> a real readout."""

  @nn.compact
  def __call__(self, x):
    h = jnp.tanh(lu.OrthogonalLinear(4, use_bias=True)(x))
    h = lu.UnitaryLinear(3, real_pairs=True, use_bias=True)(h)
    return nn.Dense(1)(h)[..., 0]


def test_rectangular_layers_train():
  # A teacher of the same architecture makes the target reachable.
  x = np.random.default_rng(13).standard_normal((64, 6)).astype(np.float32)
  model = _Regressor()
  tx = optax.adam(0.05)

  @jax.jit
  def train(teacher_key, key):
    y = model.apply(model.init(teacher_key, x), x)
    loss = lambda p: jnp.mean((model.apply(p, x) - y) ** 2)

    def step(carry, _):
      params, state = carry
      value, grads = jax.value_and_grad(loss)(params)
      updates, state = tx.update(grads, state, params)
      return (optax.apply_updates(params, updates), state), value

    params = model.init(key, x)
    (trained, _), losses = jax.lax.scan(step, (params, tx.init(params)), length=50)
    w = lu.nn.orthogonal_weight(trained["params"]["OrthogonalLinear_0"]["mu"], 6, 4)
    return params, trained, losses, loss(trained), w

  params, trained, losses, final, w = jax.tree.map(
      np.asarray, train(jax.random.key(99), jax.random.key(14)))
  assert final < losses[0] / 10, (losses[0], final)
  for name, param in (("OrthogonalLinear_0", "mu"), ("UnitaryLinear_0", "lam")):
    assert not np.allclose(trained["params"][name][param], params["params"][name][param])
  assert lu.isometry_report(w).error < 1e-5


def _init_shapes(layer, x, **kwargs):
  """`layer.init` traced on x's shape and dtype only (`jax.eval_shape`): the layers check
  their input in Python, so this raises as `init` does, compiling nothing."""
  return jax.eval_shape(lambda key, x: layer.init(key, x, **kwargs), jax.random.key(0),
                        jax.ShapeDtypeStruct(x.shape, x.dtype))


def test_wrong_input_raises():
  ones = lambda n, dtype=np.float32: np.ones((n,), dtype)
  with pytest.raises(ValueError, match="real_pairs=True"):
    _init_shapes(lu.UnitaryLinear(3), ones(6))
  with pytest.raises(ValueError, match=r"real_pairs=True expects REAL input \(\.\.\., 2n\)"):
    _init_shapes(lu.UnitaryLinear(3, real_pairs=True), ones(5))
  with pytest.raises(ValueError, match="REAL input"):
    _init_shapes(lu.UnitaryLinear(3, real_pairs=True), ones(4, np.complex64))
  with pytest.raises(ValueError, match="OrthogonalLinear expects real"):
    _init_shapes(lu.OrthogonalLinear(3), ones(3, np.complex64))
  with pytest.raises(ValueError, match="features must be an integer ≥ 1"):
    _init_shapes(lu.UnitaryLinear(0), ones(3, np.complex64))
  with pytest.raises(ValueError, match="features must be an integer ≥ 1"):
    _init_shapes(lu.OrthogonalLinear(0), ones(3))
  with pytest.raises(ValueError, match="in_features must be an integer ≥ 1"):
    jax.eval_shape(lambda key: lu.OrthogonalLinear(2).init(key, 0, method="matrix"),
                   jax.random.key(0))


def test_isometry_report_against_closed_forms():
  theta = np.array([0.3, -2.0, 1.1])
  report = lu.isometry_report(np.diag(np.exp(1j * theta)))
  assert report.kind == "unitary" and report.shape == (3, 3)
  np.testing.assert_allclose(report.phases, np.sort(theta), atol=1e-14)
  assert report.error < 1e-15 and report.modulus_error < 1e-15
  # 1.1·E_2 (3×2): WᴴW = 1.21·I, singular values 1.1.
  report = lu.isometry_report(1.1 * np.eye(3)[:, :2])
  assert report.kind == "isometry" and report.phases is None and report.modulus_error is None
  np.testing.assert_allclose([report.error, report.singular_min, report.singular_max],
                             [0.21, 1.1, 1.1], atol=1e-14)
  # Rows scaled by 1 and 0.5 (2×3): WWᴴ = diag(1, 0.25).
  report = lu.isometry_report(np.diag([1.0, 0.5]) @ np.eye(3)[:2])
  assert report.kind == "co-isometry"
  np.testing.assert_allclose([report.error, report.singular_min, report.singular_max],
                             [0.75, 0.5, 1.0], atol=1e-14)
  assert "co-isometry 2x3" in str(report)
  with pytest.raises(ValueError, match="2-D"):
    lu.isometry_report(np.ones(3))
  with pytest.raises(ValueError, match="non-finite"):
    lu.isometry_report(np.array([[np.nan]]))


@pytest.mark.parametrize("features", [3, 5])  # square, and an isometry 3 -> 5
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_half_precision_parameters_raise(dtype, features):
  name = jnp.dtype(dtype).name
  x = np.ones((2, 3), np.float32)
  layer = lu.UnitaryLinear(features, real_pairs=True, param_dtype=dtype)
  with pytest.raises(ValueError, match=rf"lam's dtype must be float32 or float64; got {name}"):
    _init_shapes(layer, np.ones((2, 6), np.float32))
  layer = lu.OrthogonalLinear(features, param_dtype=dtype)
  with pytest.raises(ValueError, match=rf"mu's dtype must be float32 or float64; got {name}"):
    _init_shapes(layer, x)
  for layer in (lu.UnitaryLinear(features, param_dtype=dtype),  # complex: not complex64
                lu.UnitaryLinear(features, real_pairs=True, param_dtype=dtype),
                lu.OrthogonalLinear(features, param_dtype=dtype)):
    with pytest.raises(ValueError, match=rf"param_dtype must be float32 or float64; got {name}"):
      layer.as_dense()


@pytest.mark.parametrize("n,k", [(6, 2), (3, 5), (4, 4)])
def test_dense_params_apply_the_same_map(n, k):
  """The cached weight (`dense_params`, formed once under jit) in `as_dense`'s nn.Dense
  gives each layer's own output: orthogonal, complex and real-pair unitary, with bias."""
  x = np.random.default_rng(n).standard_normal((3, n)).astype(np.float32)
  xc = _complex(k, (3, n))
  xr = np.concatenate([xc.real, xc.imag], axis=-1)
  bias_init = nn.initializers.normal(1.0)
  orth = lu.OrthogonalLinear(k, use_bias=True, bias_init=bias_init)
  unit = lu.UnitaryLinear(k, use_bias=True, bias_init=bias_init)
  pairs = lu.UnitaryLinear(k, real_pairs=True, use_bias=True, bias_init=bias_init)

  @jax.jit
  def run(key):
    out = []
    for layer, inputs in ((orth, x), (unit, xc), (pairs, xr)):
      variables = layer.init(key, inputs)
      params = layer.apply(variables, n, method="dense_params")
      dense = layer.as_dense().apply({"params": params}, inputs)
      out.append((layer.apply(variables, inputs), dense, params["kernel"]))
    return out

  (y_o, d_o, k_o), (y_u, d_u, k_u), (y_p, d_p, k_p) = jax.tree.map(np.asarray,
                                                                   run(jax.random.key(0)))
  assert k_o.shape == (n, k) and k_o.dtype == np.float32
  assert k_u.shape == (n, k) and k_u.dtype == np.complex64
  assert k_p.shape == (2 * n, 2 * k) and k_p.dtype == np.float32
  for y, dense in ((y_o, d_o), (y_u, d_u), (y_p, d_p)):
    assert dense.dtype == y.dtype
    np.testing.assert_allclose(dense, y, atol=1e-5)


def test_input_precision_is_kept_or_refused_not_lowered(x64):
  # float32 parameters: float64 pairs promote (as complex128 input does), half is refused.
  layer = lu.UnitaryLinear(2, real_pairs=True)
  x = np.array([[1 + 1e-10, 0.0, 0.0, 0.0]])  # float64: the 1e-10 lost in float32
  variables = jax.jit(layer.init)(jax.random.key(0), x.astype(np.float32))
  y = layer.apply(variables, x)
  y_complex = lu.UnitaryLinear(2).apply(variables, x[:, :2] + 1j * x[:, 2:])
  assert y.dtype == np.float64 and y_complex.dtype == np.complex128
  np.testing.assert_allclose(y, np.concatenate([y_complex.real, y_complex.imag], -1), atol=1e-15)
  for layer, width in ((lu.UnitaryLinear(2, real_pairs=True), 4), (lu.OrthogonalLinear(2), 2)):
    for dtype in (jnp.float16, jnp.bfloat16):
      with pytest.raises(ValueError, match="input dtype must be float32 or float64"):
        _init_shapes(layer, np.ones((1, width), dtype))
