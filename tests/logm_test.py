"""The principal logarithm against expm and known coefficients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lie_unitary as lu

# fast_compiles: compile-bound (measured cold, 2 cores: 27 s -> 18 s).
pytestmark = pytest.mark.usefixtures("strict_rank_promotion", "fast_compiles")


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


def test_after_keeps_values_and_orders_the_two_eighs():
  from lie_unitary import sequencing
  u = lu.random_unitary(jax.random.key(3), 4, "haar")
  key = jax.random.key(0)
  out_u, out_key = sequencing.after((u, key), jnp.float32(jnp.nan))
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
