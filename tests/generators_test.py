"""Random unitary generators: unitarity, definitions, and Haar statistics.

Compile-bound: each test compiles one program (eager calls would compile every
primitive), and the checks run in NumPy.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lie_unitary as lu

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")


@pytest.mark.parametrize("method", lu.GENERATORS)
@pytest.mark.parametrize("dtype, tol", [(jnp.complex64, 2e-5), (jnp.complex128, 1e-12)])
def test_generators_are_unitary(x64, method, dtype, tol):
  sizes = (1, 6)
  draws = jax.jit(lambda key: [lu.random_unitary(key, n, method, dtype) for n in sizes])(
      jax.random.key(1))
  for n, u in zip(sizes, draws):
    assert u.shape == (n, n) and u.dtype == dtype
    u = np.asarray(u, np.complex128)
    assert np.max(np.abs(u.conj().T @ u - np.eye(n))) <= tol


def _sample(method, n=4, count=2000):
  draw = jax.vmap(lambda k: lu.random_unitary(k, n, method))
  return np.asarray(jax.jit(lambda key: draw(jax.random.split(key, count)))(jax.random.key(0)))


def test_haar_statistics():
  u = _sample("haar")
  # Haar: E|tr U|² = 1 for every n, E U_ij = 0, E|U_ij|² = 1/n.
  assert abs(np.mean(np.abs(np.trace(u, axis1=1, axis2=2)) ** 2) - 1.0) < 0.1
  assert np.max(np.abs(np.mean(u, axis=0))) < 0.06
  np.testing.assert_allclose(np.mean(np.abs(u) ** 2, axis=0), 0.25, atol=0.03)


def test_qr_is_not_haar():
  """The original code's generator keeps Q as is: its entries have a nonzero mean."""
  u = _sample("qr")
  assert np.abs(np.mean(u[:, 0, 0])) > 0.3


def test_lie_generator_definition():
  @jax.jit
  def run(key):
    lam = jax.random.normal(key, (9,))
    return lu.random_unitary(key, 3, "lie"), lu.unitary_from_lambdas(lam)

  u, ref = run(jax.random.key(5))
  np.testing.assert_allclose(u, ref, atol=1e-6)


def test_qr_generator_definition():
  @jax.jit
  def run(key):
    k_re, k_im = jax.random.split(key)
    return (lu.random_unitary(key, 5, "qr"),
            jax.random.uniform(k_re, (5, 5)), jax.random.uniform(k_im, (5, 5)))

  u, a_re, a_im = map(np.asarray, run(jax.random.key(6)))
  # Q R = A with R upper triangular.
  r = np.conj(u.T) @ (a_re + 1j * a_im)
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
  rng = np.random.default_rng(8)
  x = (rng.normal(size=(4, n)) + 1j * rng.normal(size=(4, n))).astype(np.complex64)

  @jax.jit
  def run(key, x):
    p = lu.random_arjovsky_params(key, n)
    return p, lu.arjovsky_unitary(**p), lu.random_unitary(key, n, "composition"), \
        lu.arjovsky_apply(x, **p)

  p, u, drawn, applied = jax.tree.map(np.asarray, run(jax.random.key(7), x))
  s = np.sqrt(6 / (2 + 2 * n))
  assert np.all(np.abs(p["reflections_re"]) <= s)
  assert np.all(np.abs(p["angles"]) <= np.pi)
  assert sorted(p["permutation"].tolist()) == list(range(n))
  np.testing.assert_allclose(u, _dense_composition(p), atol=2e-6)
  np.testing.assert_allclose(drawn, u)
  np.testing.assert_allclose(applied, x @ u.T, atol=2e-6)


def test_vmap_over_keys_equals_loop():
  keys = jax.random.split(jax.random.key(1), 3)
  one = lambda k: {m: lu.random_unitary(k, 4, m) for m in lu.GENERATORS}  # noqa: E731
  # One program: the vmapped draws and a loop over the keys (lax.map: no batching).
  batched, loop = jax.jit(lambda keys: (jax.vmap(one)(keys), jax.lax.map(one, keys)))(keys)
  for method in lu.GENERATORS:
    np.testing.assert_allclose(batched[method], loop[method], atol=1e-6, err_msg=method)


def test_bad_arguments_raise():
  # Traced only (`jax.eval_shape`): the checks run in Python, so nothing needs compiling.
  draw = lambda *args: jax.eval_shape(lambda k: lu.random_unitary(k, *args), jax.random.key(0))
  with pytest.raises(ValueError, match="unknown generator method 'gaussian'"):
    draw(3, "gaussian")
  for dtype in (jnp.float32, "foo"):
    with pytest.raises(ValueError, match="complex64 or complex128"):
      draw(3, "haar", dtype)
  with pytest.raises(ValueError, match="positive integer"):
    draw(0, "haar")
  assert draw(np.int64(3), "haar").shape == (3, 3)  # a NumPy integer is an integer
  for method in lu.GENERATORS:  # dtype None: the default complex ('haar' was real before)
    assert draw(3, method, None).dtype == jnp.complex64
  with pytest.raises(ValueError, match="reflection_scale must be a finite float > 0"):
    draw(3, "composition", jnp.complex64, 0.0)  # v = 0: no reflection, a NaN matrix
  for scale in (-1.0, float("nan"), True):
    with pytest.raises(ValueError, match="reflection_scale must be a finite float > 0"):
      draw(3, "haar", jnp.complex64, scale)  # checked whatever the method
  with pytest.raises(ValueError, match="reflection_scale is a parameter of method 'composition'"):
    draw(3, "lie", jnp.complex64, 0.5)  # not ignored
  assert draw(3, "composition", jnp.complex64, np.float32(0.5)).shape == (3, 3)
  # Parameters of random_arjovsky_params(key, 4)'s shapes and dtypes: the checks need no draw.
  p = {"angles": np.zeros((3, 4), np.float32), "reflections_re": np.ones((2, 4), np.float32),
       "reflections_im": np.ones((2, 4), np.float32), "permutation": np.arange(4, dtype=np.int32)}
  with pytest.raises(ValueError, match="reflections_re"):
    jax.eval_shape(lu.arjovsky_unitary, p["angles"], p["reflections_re"][:, :3],
                   p["reflections_im"], p["permutation"])
  with pytest.raises(ValueError, match="real"):
    jax.eval_shape(lu.arjovsky_unitary, p["angles"].astype(jnp.complex64), p["reflections_re"],
                   p["reflections_im"], p["permutation"])
  with pytest.raises(ValueError, match="float32 or float64; got float16"):
    lu.random_arjovsky_params(jax.random.key(0), 4, jnp.float16)
  with pytest.raises(ValueError, match="the dtype of reflections_re must be float32 or float64"):
    jax.eval_shape(lu.arjovsky_unitary, p["angles"], p["reflections_re"].astype(jnp.float16),
                   p["reflections_im"], p["permutation"])
  with pytest.raises(ValueError, match=r"x must have last axis n=4; got x.shape=\(\)"):
    lu.arjovsky_apply(1.0, **p)
  # Integer reflections are promoted to the default float, as elsewhere.
  assert jax.eval_shape(lu.arjovsky_unitary, *{**p, "reflections_re": np.ones((2, 4), np.int32)}
                        .values()).dtype == jnp.complex64
  # An index array that is not a permutation is refused where its values are known.
  with pytest.raises(ValueError, match=r"each of 0..3 once; got \[0, 0, 1, 2\]"):
    lu.arjovsky_unitary(**{**p, "permutation": np.array([0, 0, 1, 2], np.int32)})
