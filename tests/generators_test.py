"""Random unitary generators: unitarity, definitions, and Haar statistics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lie_unitary as lu

# fast_compiles: compile-bound (measured cold, 2 cores: about 25-35% less time).
pytestmark = pytest.mark.usefixtures("strict_rank_promotion", "fast_compiles")


@pytest.mark.parametrize("method", lu.GENERATORS)
@pytest.mark.parametrize("dtype, tol", [(jnp.complex64, 2e-5), (jnp.complex128, 1e-12)])
def test_generators_are_unitary(x64, method, dtype, tol):
  for n in (1, 6):
    u = jax.jit(lu.random_unitary, static_argnums=(1, 2, 3))(jax.random.key(n), n, method, dtype)
    assert u.shape == (n, n) and u.dtype == dtype
    assert float(jnp.max(jnp.abs(jnp.conj(u.T) @ u - jnp.eye(n)))) <= tol


def _sample(method, n=4, count=2000):
  keys = jax.random.split(jax.random.key(0), count)
  return jax.vmap(lambda k: lu.random_unitary(k, n, method))(keys)


def test_haar_statistics():
  u = _sample("haar")
  # Haar: E|tr U|² = 1 for every n, E U_ij = 0, E|U_ij|² = 1/n.
  assert abs(float(jnp.mean(jnp.abs(jnp.trace(u, axis1=1, axis2=2)) ** 2)) - 1.0) < 0.1
  assert float(jnp.max(jnp.abs(jnp.mean(u, axis=0)))) < 0.06
  np.testing.assert_allclose(jnp.mean(jnp.abs(u) ** 2, axis=0), 0.25, atol=0.03)


def test_qr_is_not_haar():
  """The original code's generator keeps Q as is: its entries have a nonzero mean."""
  u = _sample("qr")
  assert float(jnp.abs(jnp.mean(u[:, 0, 0]))) > 0.3


def test_lie_generator_definition():
  key = jax.random.key(5)
  lam = jax.random.normal(key, (9,))
  np.testing.assert_allclose(lu.random_unitary(key, 3, "lie"), lu.unitary_from_lambdas(lam),
                             atol=1e-6)


def test_qr_generator_definition():
  key = jax.random.key(6)
  u = lu.random_unitary(key, 5, "qr")
  k_re, k_im = jax.random.split(key)
  a = (np.asarray(jax.random.uniform(k_re, (5, 5)))
       + 1j * np.asarray(jax.random.uniform(k_im, (5, 5))))
  # Q R = A with R upper triangular.
  r = np.conj(np.asarray(u).T) @ a
  np.testing.assert_allclose(np.tril(r, -1), 0, atol=1e-5)


def _dense_composition(p):
  """D3 R2 F⁻¹ D2 Π R1 F D1 as explicit numpy matrices (paper eq. 1)."""
  ang = np.asarray(p["angles"], float)
  v = np.asarray(p["reflections_re"], float) + 1j * np.asarray(p["reflections_im"], float)
  n = ang.shape[1]
  d = [np.diag(np.exp(1j * a)) for a in ang]
  r = [np.eye(n) - 2 * np.outer(vk, np.conj(vk)) / np.vdot(vk, vk).real for vk in v]
  f = np.fft.fft(np.eye(n), norm="ortho")
  perm = np.eye(n)[np.asarray(p["permutation"])]
  return d[2] @ r[1] @ np.conj(f.T) @ d[1] @ perm @ r[0] @ f @ d[0]


def test_composition_matches_dense_product():
  n = 6
  p = lu.random_arjovsky_params(jax.random.key(7), n)
  s = np.sqrt(6 / (2 + 2 * n))
  assert np.all(np.abs(np.asarray(p["reflections_re"])) <= s)
  assert np.all(np.abs(np.asarray(p["angles"])) <= np.pi)
  assert sorted(np.asarray(p["permutation"]).tolist()) == list(range(n))
  u = lu.arjovsky_unitary(**p)
  np.testing.assert_allclose(u, _dense_composition(p), atol=2e-6)
  np.testing.assert_allclose(lu.random_unitary(jax.random.key(7), n, "composition"), u)
  x = jax.lax.complex(jax.random.normal(jax.random.key(8), (4, n)),
                      jax.random.normal(jax.random.key(9), (4, n)))
  np.testing.assert_allclose(lu.arjovsky_apply(x, **p), x @ u.T, atol=2e-6)


def test_vmap_over_keys_equals_loop():
  keys = jax.random.split(jax.random.key(1), 3)
  for method in lu.GENERATORS:
    one = jax.jit(lambda k, method=method: lu.random_unitary(k, 4, method))
    batched = jax.vmap(one)(keys)
    loop = jnp.stack([one(k) for k in keys])
    np.testing.assert_allclose(batched, loop, atol=1e-6, err_msg=method)


def test_bad_arguments_raise():
  key = jax.random.key(0)
  with pytest.raises(ValueError, match="unknown generator method 'gaussian'"):
    lu.random_unitary(key, 3, "gaussian")
  with pytest.raises(ValueError, match="complex64 or complex128"):
    lu.random_unitary(key, 3, "haar", jnp.float32)
  with pytest.raises(ValueError, match="positive integer"):
    lu.random_unitary(key, 0, "haar")
  p = lu.random_arjovsky_params(key, 4)
  with pytest.raises(ValueError, match="reflections_re"):
    lu.arjovsky_unitary(p["angles"], p["reflections_re"][:, :3], p["reflections_im"],
                        p["permutation"])
  with pytest.raises(ValueError, match="real"):
    lu.arjovsky_unitary(p["angles"].astype(jnp.complex64), p["reflections_re"],
                        p["reflections_im"], p["permutation"])
