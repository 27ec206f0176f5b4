"""The principal logarithm against expm and known coefficients.

Compile-bound: each check runs jitted programs (eager calls would compile every
primitive), shared between the test cases of one shape; the checks run in NumPy.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import lie_unitary as lu
from lie_unitary import logm

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")


@jax.jit
def _log_and_back(u):
  """λ = log U, U(λ) and L(λ)."""
  lam = lu.lambdas_from_unitary(u)
  return lam, lu.unitary_from_lambdas(lam), lu.lambdas_to_skew_hermitian(lam)


def _haar(seed, n, dtype=np.complex128):
  """A Haar-random U(n) matrix (NumPy: QR of a complex Gaussian, R's phases fixed)."""
  rng = np.random.default_rng(seed)
  q, r = np.linalg.qr(rng.normal(size=(n, n)) + 1j * rng.normal(size=(n, n)))
  return (q * (np.diag(r) / np.abs(np.diag(r)))).astype(dtype)


def test_recovers_small_coefficients(x64):
  # Eigenphases of L well inside (-π, π): the principal log is L itself.
  lam = 0.3 * np.random.default_rng(0).normal(size=36)
  back = jax.jit(lambda lam: lu.lambdas_from_unitary(lu.unitary_from_lambdas(lam)))(lam)
  np.testing.assert_allclose(back, lam, atol=1e-10)


@pytest.mark.parametrize("method", lu.GENERATORS)
def test_exp_of_log_is_identity_map(x64, method):
  draw = jax.vmap(lambda k: lu.random_unitary(k, 7, method, jnp.complex128))
  u = jax.jit(lambda key: draw(jax.random.split(key, 3)))(jax.random.key(0))
  lam, u_back, skew = map(np.asarray, _log_and_back(u))   # one batch of 3
  np.testing.assert_allclose(u_back, u, atol=1e-9)
  theta = np.linalg.eigvalsh(1j * skew)
  assert np.max(np.abs(theta)) <= np.pi + 1e-9


def test_degenerate_and_batched(x64):
  eye = np.stack([np.eye(4, dtype=np.complex128), -np.eye(4, dtype=np.complex128)])
  logs = np.asarray(jax.jit(lu.log_unitary)(eye))
  np.testing.assert_allclose(logs[0], 0, atol=1e-12)
  np.testing.assert_allclose(scipy.linalg.expm(logs[1]), eye[1], atol=1e-9)


def test_complex64_and_errors():
  u = _haar(1, 5, np.complex64)
  lam, u_back, _ = _log_and_back(u)
  assert lam.dtype == jnp.float32
  np.testing.assert_allclose(u_back, u, atol=2e-5)
  with pytest.raises(ValueError, match="square"):  # traced only: nothing compiles
    jax.eval_shape(lu.log_unitary, jax.ShapeDtypeStruct((2, 3), jnp.complex64))


def test_log_from_eigendecomposition_promotes_a_real_basis():
  # A real orthogonal w took the dtype of iφ cast to it: zeros came back.
  c, s = np.cos(0.3), np.sin(0.3)
  w = np.array([[c, -s], [s, c]], np.float32)
  phases = np.array([0.3, -0.7], np.float32)
  k = logm.log_from_eigendecomposition(phases, w)
  assert k.dtype == jnp.complex64
  np.testing.assert_allclose(k, w @ np.diag(1j * phases) @ w.T, atol=1e-6)
  for bad in (np.zeros((2, 4), np.float32), phases.astype(np.complex64)):
    with pytest.raises(ValueError, match="phases must be real"):
      logm.log_from_eigendecomposition(bad, w)


def test_after_keeps_values_and_orders_the_two_eighs():
  from lie_unitary import sequencing
  u = _haar(3, 4, np.complex64)
  key = jax.random.key(0)
  out_u, out_key = jax.jit(sequencing.after)((u, key), np.float32(np.nan))
  np.testing.assert_array_equal(out_u, u)
  np.testing.assert_array_equal(jax.random.key_data(out_key), jax.random.key_data(key))
  # In log_unitary the second eigh's input depends on the first eigh's output.
  jaxpr = jax.make_jaxpr(lu.log_unitary)(u)
  eighs = [i for i, e in enumerate(jaxpr.eqns)
           if "eigh" in str(e.primitive) or e.params.get("name") == "eigh"]
  assert len(eighs) == 2
  first_out = set(map(id, jaxpr.eqns[eighs[0]].outvars))
  # Walk forward from the first eigh: its outputs must reach the second eigh's inputs.
  reached = set(first_out)
  for e in jaxpr.eqns[eighs[0] + 1:eighs[1] + 1]:
    if any(id(v) in reached for v in e.invars if hasattr(v, "aval")):
      reached.update(map(id, e.outvars))
  assert any(id(v) in reached for v in jaxpr.eqns[eighs[1]].invars)
