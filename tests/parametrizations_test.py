"""The uniform parametrization interface: shapes, dtypes, masks, projections."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import lie_unitary as lu

# fast_compiles: compile-bound (measured cold, 2 cores: about 25-35% less time).
pytestmark = pytest.mark.usefixtures("strict_rank_promotion", "fast_compiles")

NAMES = tuple(lu.PARAMETRIZATIONS)


def _is_unitary(u, tol):
  u = np.asarray(u)
  return np.max(np.abs(np.conj(u.T) @ u - np.eye(u.shape[0]))) <= tol


@pytest.mark.parametrize("name", NAMES)
def test_interface(name):
  p = lu.get_parametrization(name)
  n = 10
  params, constants = p.init(jax.random.key(0), n)
  for leaf in jax.tree.leaves(params):
    assert leaf.dtype == jnp.float32  # trainable leaves are real
  assert sum(x.size for x in jax.tree.leaves(params)) >= p.num_trainable(n)
  mask = p.gradient_mask(params, constants)
  assert jax.tree.structure(mask) == jax.tree.structure(params)
  assert sum(float(jnp.sum(m)) for m in jax.tree.leaves(mask)) == p.num_trainable(n)
  projected = jax.jit(p.post_update)(params, constants)
  u = jax.jit(p.to_unitary)(projected, constants)
  assert u.shape == (n, n)
  assert jnp.iscomplexobj(u) != p.is_orthogonal
  assert _is_unitary(u, 2e-5)
  # Gradients of a real loss flow to every trainable leaf and are finite.
  x = jnp.ones((n, 2), u.dtype)
  weights = jnp.arange(n, dtype=jnp.float32)[:, None]
  loss = lambda q: jnp.sum(jnp.abs(p.to_unitary(q, constants) @ x) ** 2 * weights)
  g = jax.jit(jax.grad(loss))(params)
  assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(g))
  # vmap over replicate keys.
  batched, _ = jax.vmap(lambda k: p.init(k, n))(jax.random.split(jax.random.key(1), 3))
  assert all(leaf.shape[0] == 3 for leaf in jax.tree.leaves(batched))


def test_lie_restricted_trains_only_masked_coefficients():
  p = lu.get_parametrization("lie_restricted")
  n = 10
  params, constants = p.init(jax.random.key(2), n)
  assert float(jnp.sum(constants["mask"])) == 7 * n
  x = jax.lax.complex(jnp.ones((n, 3)), jnp.arange(3 * n, dtype=jnp.float32).reshape(n, 3))
  loss = lambda q: jnp.sum(jnp.abs(p.to_unitary(q, constants) @ x - x[::-1]) ** 2)
  opt = optax.rmsprop(1e-2, decay=0.9)
  state = opt.init(params)
  new = params
  for _ in range(3):
    g = lu.apply_gradient_mask(jax.grad(loss)(new), p.gradient_mask(new, constants))
    updates, state = opt.update(g, state, new)
    new = optax.apply_updates(new, updates)
  changed = np.asarray(new["lam"] != params["lam"])
  np.testing.assert_array_equal(changed, np.asarray(constants["mask"]) == 1)


def test_projection_is_the_polar_factor(x64):
  k1, k2 = jax.random.split(jax.random.key(3))
  a = jax.lax.complex(jax.random.normal(k1, (6, 6), jnp.float64),
                      jax.random.normal(k2, (6, 6), jnp.float64))
  u = lu.polar_unitary(a)
  ref, _ = jax.scipy.linalg.polar(a, method="svd")
  np.testing.assert_allclose(u, ref, atol=1e-12)
  # The closest unitary: no random unitary is closer to a.
  others = jax.vmap(lambda k: lu.random_unitary(k, 6, "haar", jnp.complex128))(
      jax.random.split(k1, 64))
  nearest_other = jnp.min(jnp.linalg.norm(others - a[None], axis=(1, 2)))
  assert float(jnp.linalg.norm(u - a)) < float(nearest_other)
  p = lu.get_parametrization("projection")
  params = {"re": jnp.real(a), "im": jnp.imag(a)}
  np.testing.assert_allclose(p.to_unitary(p.post_update(params, {}), {}), u, atol=1e-12)


def test_orthogonal_parametrizations_have_determinants():
  so = lu.get_parametrization("so_algebra")
  params, c = so.init(jax.random.key(4), 5)
  assert params["mu"].shape == (10,)
  assert abs(float(jnp.linalg.det(so.to_unitary(params, c))) - 1.0) < 1e-5
  proj = lu.get_parametrization("projection_orthogonal")
  params, c = proj.init(jax.random.key(4), 5)
  r = proj.to_unitary(proj.post_update(params, c), c)
  assert abs(abs(float(jnp.linalg.det(r))) - 1.0) < 1e-5  # O(n): either sign


def test_float64_parameters(x64):
  params, c = lu.get_parametrization("lie_algebra").init(jax.random.key(0), 3, jnp.float64)
  assert lu.get_parametrization("lie_algebra").to_unitary(params, c).dtype == jnp.complex128


def test_bad_arguments_raise():
  with pytest.raises(ValueError, match="unknown parametrization 'cayley'"):
    lu.get_parametrization("cayley")
  p = lu.get_parametrization("lie_algebra")
  with pytest.raises(ValueError, match="positive integer"):
    p.init(jax.random.key(0), 0)
  for dtype in (jnp.complex64, jnp.bfloat16, jnp.float16):
    with pytest.raises(ValueError, match="parameter dtype must be float32 or float64"):
      p.init(jax.random.key(0), 3, dtype)
  with pytest.raises(ValueError, match="square"):
    lu.polar_unitary(jnp.zeros((2, 3)))


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
  p = lu.get_parametrization("projection_orthogonal")
  target = lu.orthogonal_from_lambdas(jax.random.normal(jax.random.key(0), (n * (n - 1) // 2,),
                                                        jnp.float64))
  params, constants = p.init(jax.random.key(1), n, jnp.float64)
  w = lu.polar_unitary(params["matrix"])
  if np.sign(np.linalg.det(w)) != det:
    w = w.at[0].multiply(-1.0)
  params = {"matrix": w}
  loss = lambda prm: jnp.sum((p.to_unitary(prm, constants) - target) ** 2)
  for _ in range(400):
    g = jax.grad(loss)(params)
    params = p.post_update(jax.tree.map(lambda a, b: a - 0.05 * b, params, g), constants)
  np.testing.assert_allclose(np.linalg.det(params["matrix"]), det, atol=1e-10)
  np.testing.assert_allclose(loss(params), expected, atol=1e-6)
