"""The uniform parametrization interface: shapes, dtypes, masks, projections.

Compile-bound: each test compiles one program (eager calls would compile every
primitive, and an eager loop re-traces every step), and the checks run in NumPy.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.linalg

import lie_unitary as lu

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")

NAMES = tuple(lu.PARAMETRIZATIONS)


def _is_unitary(u, tol):
  u = np.asarray(u)
  return np.max(np.abs(np.conj(u.T) @ u - np.eye(u.shape[0]))) <= tol


@pytest.mark.parametrize("name", NAMES)
def test_interface(name):
  p = lu.get_parametrization(name)
  n = 10

  @jax.jit
  def run(key):
    params, constants = p.init(key, n)
    u = p.to_unitary(p.post_update(params, constants), constants)
    # A real loss, for gradients.
    x = jnp.ones((n, 2), u.dtype)
    weights = jnp.arange(n, dtype=jnp.float32)[:, None]
    loss = lambda q: jnp.sum(jnp.abs(p.to_unitary(q, constants) @ x) ** 2 * weights)
    return params, p.gradient_mask(params, constants), u, jax.grad(loss)(params)

  params, mask, u, g = jax.tree.map(np.asarray, run(jax.random.key(0)))
  # vmap over replicate keys: shapes only (`jax.eval_shape` traces it, compiling nothing).
  batched, _ = jax.eval_shape(lambda keys: jax.vmap(lambda k: p.init(k, n))(keys),
                              jax.ShapeDtypeStruct((3,), jax.random.key(1).dtype))
  for leaf in jax.tree.leaves(params):
    assert leaf.dtype == np.float32  # trainable leaves are real
  assert sum(x.size for x in jax.tree.leaves(params)) >= p.num_trainable(n)
  assert jax.tree.structure(mask) == jax.tree.structure(params)
  assert sum(float(np.sum(m)) for m in jax.tree.leaves(mask)) == p.num_trainable(n)
  assert u.shape == (n, n)
  assert np.iscomplexobj(u) != p.is_orthogonal
  assert _is_unitary(u, 2e-5)
  # Gradients of the real loss flow to every trainable leaf and are finite.
  assert jax.tree.structure(g) == jax.tree.structure(params)
  assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(g))
  assert all(leaf.shape[0] == 3 for leaf in jax.tree.leaves(batched))


def test_lie_restricted_trains_only_masked_coefficients():
  p = lu.get_parametrization("lie_restricted")
  n = 10
  x = (np.ones((n, 3)) + 1j * np.arange(3 * n).reshape(n, 3)).astype(np.complex64)
  opt = optax.rmsprop(1e-2, decay=0.9)

  @jax.jit
  def run(key):
    params, constants = p.init(key, n)
    loss = lambda q: jnp.sum(jnp.abs(p.to_unitary(q, constants) @ x - x[::-1]) ** 2)
    new, state = params, opt.init(params)
    for _ in range(3):
      g = lu.apply_gradient_mask(jax.grad(loss)(new), p.gradient_mask(new, constants))
      updates, state = opt.update(g, state, new)
      new = optax.apply_updates(new, updates)
    return params, constants, new

  params, constants, new = jax.tree.map(np.asarray, run(jax.random.key(2)))
  assert np.sum(constants["mask"]) == 7 * n
  np.testing.assert_array_equal(new["lam"] != params["lam"], constants["mask"] == 1)


def _haar(rng, n, num):
  """`num` Haar-random U(n) matrices (NumPy: QR of a complex Gaussian, R's phases fixed)."""
  q, r = np.linalg.qr(rng.normal(size=(num, n, n)) + 1j * rng.normal(size=(num, n, n)))
  d = np.diagonal(r, axis1=-2, axis2=-1)
  return q * (d / np.abs(d))[:, None, :]


def test_projection_is_the_polar_factor(x64):
  rng = np.random.default_rng(3)
  a = rng.normal(size=(6, 6)) + 1j * rng.normal(size=(6, 6))
  p = lu.get_parametrization("projection")
  u, projected = jax.jit(lambda a: (lu.polar_unitary(a), p.to_unitary(
      p.post_update({"re": jnp.real(a), "im": jnp.imag(a)}, {}), {})))(a)
  left, _, right = np.linalg.svd(a)   # a = P Σ Qᴴ: the polar factor is P Qᴴ
  np.testing.assert_allclose(u, left @ right, atol=1e-12)
  # The closest unitary: no random unitary (Haar, by QR in NumPy) is closer to a.
  others = _haar(rng, 6, 64)
  nearest_other = np.min(np.linalg.norm(others - a[None], axis=(1, 2)))
  assert np.linalg.norm(u - a) < nearest_other
  np.testing.assert_allclose(projected, u, atol=1e-12)


def test_orthogonal_parametrizations_have_determinants():
  so = lu.get_parametrization("so_algebra")
  proj = lu.get_parametrization("projection_orthogonal")

  @jax.jit
  def run(key):
    params, c = so.init(key, 5)
    projected, cp = proj.init(key, 5)
    return params, so.to_unitary(params, c), proj.to_unitary(proj.post_update(projected, cp), cp)

  params, r_so, r = jax.tree.map(np.asarray, run(jax.random.key(4)))
  assert params["mu"].shape == (10,)
  assert abs(np.linalg.det(r_so) - 1.0) < 1e-5
  assert abs(abs(np.linalg.det(r)) - 1.0) < 1e-5  # O(n): either sign


def test_float64_parameters(x64):
  p = lu.get_parametrization("lie_algebra")
  # Traced only (eval_shape): the dtypes are decided at trace time.
  params, u = jax.eval_shape(lambda k: (lambda q, c: (q, p.to_unitary(q, c)))(
      *p.init(k, 3, jnp.float64)), jax.random.key(0))
  assert params["lam"].dtype == jnp.float64 and u.dtype == jnp.complex128


def test_bad_arguments_raise():
  with pytest.raises(ValueError, match="unknown parametrization 'cayley'"):
    lu.get_parametrization("cayley")
  p = lu.get_parametrization("lie_algebra")
  with pytest.raises(ValueError, match="positive integer"):
    p.init(jax.random.key(0), 0)
  params, _ = jax.eval_shape(lambda k: p.init(k, np.int64(3)), jax.random.key(0))
  assert params["lam"].shape == (9,)  # a NumPy integer is an integer
  for name in NAMES:  # a count of coefficients for no matrix size is an error, not n²
    for n in (-3, 0, 2.0, True):
      with pytest.raises(ValueError, match=f"n must be a positive integer; got {n!r}"):
        lu.get_parametrization(name).num_trainable(n)
  assert p.num_trainable(np.int32(4)) == 16
  for name in ("so_algebra", "special_unitary"):  # n = 1 counted 0 where init refuses it
    q = lu.get_parametrization(name)
    with pytest.raises(ValueError, match="n ≥ 2"):
      q.num_trainable(1)
    with pytest.raises(ValueError, match="n ≥ 2"):
      q.init(jax.random.key(0), 1)
  projection = lu.get_parametrization("projection")
  bad = {"re": np.ones((2, 2), np.float32), "im": np.ones((1, 2), np.float32)}  # would broadcast
  for f in (projection.post_update, projection.to_unitary):
    with pytest.raises(ValueError, match=r"'re' and 'im' must have one shape; got \(2, 2\)"):
      jax.eval_shape(f, bad, {})
  for dtype in (jnp.complex64, jnp.bfloat16, jnp.float16):
    with pytest.raises(ValueError, match="parameter dtype must be float32 or float64"):
      p.init(jax.random.key(0), 3, dtype)
  with pytest.raises(ValueError, match="square"):
    lu.polar_unitary(jnp.zeros((2, 3)))
  with pytest.raises(ValueError, match="float32 or float64; got float16"):
    lu.polar_unitary(jnp.eye(2, dtype=jnp.float16))
  grads = {"lam": np.ones(4, np.float32)}
  for mask, match in (({"lam": np.ones(3)}, r"mask for \['lam'\] has shape \(3,\)"),
                      ({"mu": np.ones(4)}, "structure"),
                      ({"lam": np.ones(4, np.complex64)}, r"\['lam'\] must be real")):
    with pytest.raises(ValueError, match=match):
      lu.apply_gradient_mask(grads, mask)


def test_gradient_mask_of_wrong_size_raises():
  grads = {"lam": jnp.ones(16)}
  with pytest.raises(ValueError, match=r"mask for \['lam'\] has shape \(9,\)"):
    lu.apply_gradient_mask(grads, {"lam": jnp.ones(9)})
  with pytest.raises(ValueError, match="structure"):
    lu.apply_gradient_mask(grads, {"mu": jnp.ones(16)})


@pytest.mark.parametrize("det,expected", [(1.0, 0.0), (-1.0, 4.0)])
def test_projection_orthogonal_stays_in_its_component_of_o_n(x64, det, expected):
  # Gradient steps on ‖W - U‖²_F (the population loss E‖(W - U)x‖² for x ~ N(0, I)),
  # each followed by the polar projection, never change det W. For an SO(n) target U
  # the best W with det = -1 reflects one direction of U: ‖W - U‖²_F = 2² = 4.
  n = 5
  rng = np.random.default_rng(0)
  a = rng.normal(size=(n, n))
  target = scipy.linalg.expm(a - a.T)   # in SO(n)
  left, _, right = np.linalg.svd(rng.normal(size=(n, n)))
  w = left @ right                      # a random point of O(n)
  if np.sign(np.linalg.det(w)) != det:
    w[0] *= -1.0
  params = jax.tree.map(np.asarray, _projected_descent({"matrix": w}, target))
  np.testing.assert_allclose(np.linalg.det(params["matrix"]), det, atol=1e-10)
  np.testing.assert_allclose(np.sum((params["matrix"] - target) ** 2), expected, atol=1e-6)


@jax.jit
def _projected_descent(params, target):
  """400 steps of gradient descent on ‖W - U‖²_F, each followed by the polar projection."""
  p = lu.get_parametrization("projection_orthogonal")
  loss = lambda prm: jnp.sum((p.to_unitary(prm, {}) - target) ** 2)

  def step(_, params):
    g = jax.grad(loss)(params)
    return p.post_update(jax.tree.map(lambda a, b: a - 0.05 * b, params, g), {})

  return jax.lax.fori_loop(0, 400, step, params)
