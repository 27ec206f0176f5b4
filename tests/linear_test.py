"""Flax layers: they apply exactly U(λ), once per call, and reject wrong input."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lie_unitary as lu

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")


def _complex(key, shape):
  k1, k2 = jax.random.split(key)
  return jax.lax.complex(jax.random.normal(k1, shape), jax.random.normal(k2, shape))


def test_unitary_linear_complex_and_real_pairs():
  n = 5
  x = _complex(jax.random.key(0), (2, 3, n))
  layer = lu.UnitaryLinear(n)
  variables = layer.init(jax.random.key(1), x)
  lam = variables["params"]["lam"]
  assert lam.shape == (n * n,) and lam.dtype == jnp.float32
  u = lu.unitary_from_lambdas(lam)
  y = layer.apply(variables, x)
  np.testing.assert_allclose(y, jnp.einsum("ij,abj->abi", u, x), atol=1e-5)
  np.testing.assert_allclose(jnp.linalg.norm(y, axis=-1), jnp.linalg.norm(x, axis=-1), rtol=1e-5)
  pairs = lu.UnitaryLinear(n, real_pairs=True)
  xr = jnp.concatenate([jnp.real(x), jnp.imag(x)], axis=-1)
  yr = pairs.apply(variables, xr)
  np.testing.assert_allclose(yr, jnp.concatenate([jnp.real(y), jnp.imag(y)], axis=-1), atol=1e-5)


def test_unitary_linear_zero_init_is_identity():
  layer = lu.UnitaryLinear(4, lambda_init=nn.initializers.zeros)
  x = _complex(jax.random.key(2), (4,))
  variables = layer.init(jax.random.key(3), x)
  np.testing.assert_allclose(layer.apply(variables, x), x, atol=1e-6)


def test_one_eigh_per_call():
  layer = lu.UnitaryLinear(6)
  x = _complex(jax.random.key(4), (32, 6))
  variables = layer.init(jax.random.key(5), x)
  loss = lambda v: jnp.sum(jnp.abs(layer.apply(v, x)) ** 2 * jnp.arange(6)[None, :])
  jaxpr = str(jax.make_jaxpr(jax.value_and_grad(loss))(variables))
  assert jaxpr.count("eigh[") == 1


def test_orthogonal_linear():
  n = 4
  x = jax.random.normal(jax.random.key(6), (3, n))
  layer = lu.OrthogonalLinear(n)
  variables = layer.init(jax.random.key(7), x)
  r = lu.orthogonal_from_lambdas(variables["params"]["mu"])
  np.testing.assert_allclose(layer.apply(variables, x), x @ r.T, atol=1e-6)
  np.testing.assert_allclose(jnp.linalg.norm(layer.apply(variables, x), axis=-1),
                             jnp.linalg.norm(x, axis=-1), rtol=1e-5)


def test_wrong_input_raises():
  with pytest.raises(ValueError, match="real_pairs=True"):
    lu.UnitaryLinear(3).init(jax.random.key(0), jnp.ones((6,)))
  with pytest.raises(ValueError, match=r"\(\.\.\., 3\)"):
    lu.UnitaryLinear(3).init(jax.random.key(0), jnp.ones((4,), jnp.complex64))
  with pytest.raises(ValueError, match=r"\(\.\.\., 6\)"):
    lu.UnitaryLinear(3, real_pairs=True).init(jax.random.key(0), jnp.ones((4,)))
  with pytest.raises(ValueError, match="OrthogonalLinear expects real"):
    lu.OrthogonalLinear(3).init(jax.random.key(0), jnp.ones((3,), jnp.complex64))
