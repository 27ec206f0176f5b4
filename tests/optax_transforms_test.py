"""optax transformations against the manual mask and projection rules; optax on complex numbers."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import lie_unitary as lu

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")


def _polar_by_svd(a):
  """The polar factor P Qᴴ of a = P Σ Qᴴ, from NumPy's SVD."""
  p, _, qh = np.linalg.svd(np.asarray(a))
  return p @ qh


def test_entrywise_mask_equals_apply_gradient_mask_then_optimizer(x64):
  p = lu.get_parametrization("lie_restricted")
  n = 10  # 7n = 70 of the n² = 100 coefficients train
  params, constants = jax.jit(lambda key: p.init(key, n, jnp.float64))(jax.random.key(0))
  mask = p.gradient_mask(params, constants)
  target = np.linspace(-1.0, 1.0, n * n)
  loss = lambda q: jnp.sum(jnp.cos(q["lam"]) * target + (q["lam"] - target) ** 2)  # noqa: E731
  manual, chained = optax.rmsprop(1e-2), optax.chain(lu.entrywise_gradient_mask(mask),
                                                     optax.rmsprop(1e-2))

  @jax.jit
  def run(params):
    a, b = params, params
    sa, sb = manual.init(a), chained.init(b)
    for _ in range(2):
      ua, sa = manual.update(lu.apply_gradient_mask(jax.grad(loss)(a), mask), sa, a)
      a = optax.apply_updates(a, ua)
      ub, sb = chained.update(jax.grad(loss)(b), sb, b)
      b = optax.apply_updates(b, ub)
    return a, b

  a, b = run(params)
  np.testing.assert_array_equal(b["lam"], a["lam"])
  changed = np.asarray(b["lam"] != params["lam"])
  np.testing.assert_array_equal(changed, np.asarray(constants["mask"]) == 1)


def test_entrywise_mask_checks_shapes():
  t = lu.entrywise_gradient_mask({"lam": jnp.ones(9)})
  with pytest.raises(ValueError, match=r"mask for \['lam'\] has shape \(9,\)"):
    t.init({"lam": jnp.zeros(16)})
  with pytest.raises(ValueError, match=r"mask for \['lam'\] has shape \(9,\)"):
    t.update({"lam": jnp.zeros(16)}, optax.EmptyState())
  with pytest.raises(ValueError, match="structure"):
    t.init({"mu": jnp.zeros(9)})


@pytest.mark.parametrize("inner", ["sgd", "rmsprop"])
def test_polar_projection_is_post_update_after_the_step(x64, inner):
  n = 4
  proj = lu.get_parametrization("projection")
  params, constants = jax.jit(lambda key: proj.init(key, n, jnp.float64))(jax.random.key(1))
  rng = np.random.default_rng(2)
  x = rng.normal(size=(n, 6)) + 1j * rng.normal(size=(n, 6))
  y = x[::-1] * 1j
  loss = lambda q: jnp.sum(jnp.abs(proj.to_unitary(q, constants) @ x - y) ** 2)  # noqa: E731
  opt = optax.sgd(0.05) if inner == "sgd" else optax.rmsprop(0.01, decay=0.9)
  chained = optax.chain(opt, lu.polar_projection("real_pair"))

  @jax.jit
  def step(q, state):
    updates, state = chained.update(jax.grad(loss)(q), state, q)
    return optax.apply_updates(q, updates), state

  @jax.jit
  def raw_step(q, state):  # the inner optimizer alone: params + step, not projected
    updates, state = opt.update(jax.grad(loss)(q), state, q)
    return optax.apply_updates(q, updates), state

  projected = jax.jit(lambda q: proj.to_unitary(proj.post_update(q, constants), constants))
  q, state = params, chained.init(params)
  ref, ref_state = params, opt.init(params)
  for _ in range(3):
    q, state = step(q, state)
    stepped, ref_state = raw_step(ref, ref_state)
    polar = _polar_by_svd(np.asarray(stepped["re"]) + 1j * np.asarray(stepped["im"]))
    ref = {"re": jnp.asarray(polar.real), "im": jnp.asarray(polar.imag)}
    # params + (polar - params) is the polar factor up to an ulp of the larger.
    u = np.asarray(q["re"]) + 1j * np.asarray(q["im"])
    np.testing.assert_allclose(u, polar, atol=1e-14)
    np.testing.assert_allclose(projected(stepped), polar, atol=1e-14)
    np.testing.assert_allclose(np.conj(u.T) @ u, np.eye(n), atol=1e-14)
  start = np.asarray(projected(params))   # the loss after projecting the initial params
  assert np.sum(np.abs(u @ x - y) ** 2) < np.sum(np.abs(start @ x - y) ** 2)


def test_polar_projection_of_matrix_leaves_and_custom_layouts(x64):
  n = 3
  rng = np.random.default_rng(3)
  real = rng.normal(size=(n, n))
  cplx = rng.normal(size=(2, n, n)) + 1j * rng.normal(size=(2, n, n))
  updates = {"matrix": 0.1 * real.T, "w": 0.1 * np.conj(cplx)}
  params = {"matrix": real, "w": cplx}
  # One step through the transformation `t` (static: a tuple of functions).
  apply = jax.jit(lambda t, p, u: optax.apply_updates(p, t.update(u, t.init(p), p)[0]),
                  static_argnums=0)

  # Every leaf a matrix (projection_orthogonal's {"matrix": ...} is one real leaf).
  out = apply(lu.polar_projection(), params, updates)
  orth = _polar_by_svd(real + 0.1 * real.T)
  np.testing.assert_allclose(out["matrix"], orth, atol=1e-14)
  np.testing.assert_allclose(np.linalg.det(orth) ** 2, 1.0, atol=1e-13)
  for b in range(2):
    np.testing.assert_allclose(out["w"][b], _polar_by_svd(cplx[b] + 0.1 * np.conj(cplx[b])),
                               atol=1e-14)
  # A layout of one's own: the complex matrix is [[Re, -Im], [Im, Re]] in a real block.
  layout = lu.MatrixLayout(
      to_matrices=lambda q: jax.lax.complex(q["block"][:n, :n], q["block"][n:, :n]),
      from_matrices=lambda u: {"block": jnp.block([[u.real, -u.imag], [u.imag, u.real]])})
  a = cplx[0]
  block = {"block": np.block([[a.real, -a.imag], [a.imag, a.real]])}
  out = apply(lu.polar_projection(layout), block, {"block": np.zeros((2 * n, 2 * n))})
  polar = _polar_by_svd(a)
  np.testing.assert_allclose(out["block"][:n, :n], polar.real, atol=1e-14)
  np.testing.assert_allclose(out["block"][n:, :n], polar.imag, atol=1e-14)


def test_polar_projection_errors():
  # Traced only (`jax.eval_shape`): the checks run in Python, so nothing needs compiling.
  traced = lambda f, *args: jax.eval_shape(lambda: f(*args))
  params = {"re": np.eye(2, dtype=np.float32), "im": np.zeros((2, 2), np.float32)}
  t = lu.polar_projection("real_pair")
  with pytest.raises(ValueError, match="needs the current params"):
    traced(lambda: t.update(params, t.init(params)))
  for updates, match in (({"re": np.ones(2, np.float32), "im": params["im"]},
                          r"update for \['re'\] has shape \(2,\), its parameter \(2, 2\)"),
                         ({"re": params["re"]}, "updates have structure")):
    with pytest.raises(ValueError, match=match):  # not broadcast into params
      traced(lambda: t.update(updates, t.init(params), params))
  with pytest.raises(ValueError, match="layout must be one of"):
    lu.polar_projection("polar")
  with pytest.raises(ValueError, match=r"'re': \(..., n, n\)"):
    traced(t.init, {"matrix": np.eye(2, dtype=np.float32)})
  with pytest.raises(ValueError, match="square"):
    traced(lu.polar_projection().init, {"matrix": np.zeros((2, 3), np.float32)})
  for dtype in (np.int32, np.float16):  # half precision was refused only at the update
    with pytest.raises(ValueError, match="square float or complex"):
      traced(lu.polar_projection().init, {"matrix": np.zeros((2, 2), dtype)})
  # Integer or unlike parts of a real pair: lax.complex's TypeError before.
  eye = np.eye(2, dtype=np.float32)
  for re, im in ((eye.astype(np.int32), eye.astype(np.int32)), (eye, eye.astype(np.float16))):
    with pytest.raises(ValueError, match="one dtype, float32 or float64"):
      traced(t.init, {"re": re, "im": im})
  bad = lu.MatrixLayout(lambda q: q["a"], lambda m: {"b": m})
  with pytest.raises(ValueError, match="structure"):
    traced(lu.polar_projection(bad).init, {"a": np.eye(2, dtype=np.float32)})


# optax on complex parameters --------------------------------------------------------

_TARGET = np.array([1.0 + 2.0j, -1.0 + 0.5j, 0.3 - 1.0j])


def _complex_loss(z):
  return jnp.sum(jnp.abs(z - _TARGET) ** 2)


def _pair_loss(q):
  return _complex_loss(jax.lax.complex(q["re"], q["im"]))


def test_jax_complex_gradient_makes_optax_ascend_in_the_imaginary_part(x64):
  z = np.zeros(3, np.complex128)
  q = {"re": np.zeros(3), "im": np.zeros(3)}
  opt = optax.sgd(0.1)

  @jax.jit  # one program for the steps and losses below
  def run(z, q):
    g = jax.grad(_complex_loss)(z)
    z1 = optax.apply_updates(z, opt.update(g, opt.init(z))[0])
    q1 = optax.apply_updates(q, opt.update(jax.grad(_pair_loss)(q), opt.init(q))[0])
    return g, z1, q1, [_complex_loss(z), _complex_loss(z1), _pair_loss(q), _pair_loss(q1)]

  g, z1, q1, (loss, loss1, pair_loss, pair_loss1) = jax.tree.map(np.asarray, run(z, q))
  # ∂C/∂x - i ∂C/∂y for C = Σ (x - a)² + (y - b)²: 2(x - a) - 2i(y - b) = 2·conj(z - t).
  np.testing.assert_allclose(g, 2 * np.conj(z - _TARGET), atol=1e-15)
  assert np.all(np.abs((z1 - _TARGET).real) < np.abs((z - _TARGET).real))  # descends in x
  assert np.all(np.abs((z1 - _TARGET).imag) > np.abs((z - _TARGET).imag))  # ascends in y
  assert loss1 > loss
  # Real pairs: the gradients are ∂C/∂x and ∂C/∂y, and the same step descends in both.
  np.testing.assert_allclose(q1["re"] + 1j * q1["im"], 0.2 * _TARGET, atol=1e-15)
  assert pair_loss1 < pair_loss


@pytest.mark.skipif(not hasattr(optax.contrib, "split_real_and_imaginary"),
                    reason="this optax has no optax.contrib.split_real_and_imaginary")
def test_split_real_and_imaginary_needs_conjugated_gradients(x64):
  z = np.zeros(3, np.complex128)
  q = {"re": np.zeros(3), "im": np.zeros(3)}

  def step(opt, params, grads):
    return optax.apply_updates(params, opt.update(grads, opt.init(params), params)[0])

  split = optax.contrib.split_real_and_imaginary
  sgd, rmsprop = optax.sgd(0.1), optax.rmsprop(0.1, decay=0.9)

  @jax.jit  # one program for every step below
  def run(z, q):
    g, gq = jax.grad(_complex_loss)(z), jax.grad(_pair_loss)(q)
    pairs = [step(opt, q, gq) for opt in (sgd, rmsprop)]
    return ((step(split(sgd), z, g), step(sgd, z, g)),
            [(step(split(opt), z, jnp.conj(g)), pair, _pair_loss(pair))
             for opt, pair in zip((sgd, rmsprop), pairs)],
            step(rmsprop, z, jnp.conj(g)), _pair_loss(q))

  (split_step, plain_step), conjugated, plain, pair_loss = jax.tree.map(np.asarray, run(z, q))
  # It does not conjugate: on JAX's gradient it takes plain optax's ascending step.
  np.testing.assert_allclose(split_step, plain_step, atol=1e-15)
  # On the conjugated gradient it descends, as the real pair does; for RMSProp the two
  # parts keep separate statistics, exactly as real pairs do ...
  for stepped, pair, loss in conjugated:
    np.testing.assert_allclose(stepped, pair["re"] + 1j * pair["im"], atol=1e-15)
    assert loss < pair_loss
  # ... whereas plain RMSProp on a complex leaf divides both parts by one |g|² average.
  pair = conjugated[1][1]
  assert not np.allclose(plain, pair["re"] + 1j * pair["im"], atol=1e-3)
