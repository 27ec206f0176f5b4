"""The principal logarithm against expm and known coefficients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lie_unitary as lu

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")


def test_recovers_small_coefficients(x64):
  # Eigenphases of L well inside (-π, π): the principal log is L itself.
  lam = 0.3 * jax.random.normal(jax.random.key(0), (36,), jnp.float64)
  np.testing.assert_allclose(lu.lambdas_from_unitary(lu.unitary_from_lambdas(lam)), lam,
                             atol=1e-10)


@pytest.mark.parametrize("method", lu.GENERATORS)
def test_exp_of_log_is_identity_map(x64, method):
  for seed in range(3):
    u = lu.random_unitary(jax.random.key(seed), 7, method, jnp.complex128)
    lam = lu.lambdas_from_unitary(u)
    np.testing.assert_allclose(lu.unitary_from_lambdas(lam), u, atol=1e-9)
    theta = jnp.linalg.eigvalsh(1j * lu.lambdas_to_skew_hermitian(lam))
    assert float(jnp.max(jnp.abs(theta))) <= np.pi + 1e-9


def test_degenerate_and_batched(x64):
  eye = jnp.stack([jnp.eye(4, dtype=jnp.complex128), -jnp.eye(4, dtype=jnp.complex128)])
  logs = lu.log_unitary(eye)
  np.testing.assert_allclose(logs[0], 0, atol=1e-12)
  np.testing.assert_allclose(jax.scipy.linalg.expm(logs[1]), eye[1], atol=1e-9)


def test_complex64_and_errors():
  u = lu.random_unitary(jax.random.key(1), 5, "haar")
  lam = lu.lambdas_from_unitary(u)
  assert lam.dtype == jnp.float32
  np.testing.assert_allclose(lu.unitary_from_lambdas(lam), u, atol=2e-5)
  with pytest.raises(ValueError, match="square"):
    lu.log_unitary(jnp.zeros((2, 3), jnp.complex64))
