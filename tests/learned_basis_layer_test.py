"""The linen layer of unitaries sharing a learned basis: variables in two collections,
unitary outputs equal to the core map, the row convention, and training with optax.

Compile-bound: each test compiles one program; the checks run in NumPy.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import lie_unitary as lu
from lie_unitary import nn as lnn

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")

N, M, K = 3, 4, 5


def test_init_shapes_collections_and_unitary_outputs():
  layer = lu.LearnedBasisUnitaries(n=N, num_operators=M, basis_size=K)
  x = np.random.default_rng(0).normal(size=(M, 2, N)).astype(np.float32)

  @jax.jit
  def run(key):
    variables = layer.init(key)
    return variables, layer.apply(variables), layer.apply(variables, x)

  variables, u, y = run(jax.random.key(0))
  assert set(variables) == {"params", lnn.COEFFICIENTS_COLLECTION}
  basis = np.asarray(variables["params"]["basis"])
  coefficients = np.asarray(variables["coefficients"]["coefficients"])
  assert basis.shape == (K, N * N) and basis.dtype == np.float32
  assert coefficients.shape == (M, K) and coefficients.dtype == np.float32
  np.testing.assert_allclose(basis @ basis.T, np.eye(K), atol=1e-6)      # "random" init
  assert u.shape == (M, N, N) and u.dtype == jnp.complex64
  np.testing.assert_allclose(np.conj(np.swapaxes(u, -1, -2)) @ u,
                             np.broadcast_to(np.eye(N), u.shape), atol=1e-5)
  np.testing.assert_allclose(u, jax.jit(lu.unitary_from_basis)(coefficients, basis), atol=1e-6)
  np.testing.assert_allclose(y, np.einsum("jpb,jab->jpa", x, u), atol=1e-5)   # x[j] @ U_jᵀ
  assert lnn.collection_labels(variables) == {
      "params": {"basis": "params"}, "coefficients": {"coefficients": "coefficients"}}


def test_toroidal_basis_gives_commuting_unitaries():
  layer = lu.LearnedBasisUnitaries(n=N, num_operators=M, basis_size=N, basis_init="toroidal",
                                   param_dtype=jnp.float64)
  with jax.enable_x64(True):
    u = np.asarray(jax.jit(lambda key: layer.apply(layer.init(key)))(jax.random.key(1)))
  assert u.dtype == np.complex128
  commutators = np.einsum("aij,bjk->abik", u, u) - np.einsum("bij,ajk->abik", u, u)
  assert np.abs(commutators).max() < 1e-13


def test_optax_steps_reduce_the_loss_and_collections_train_apart():
  # Targets: M unitaries from a hidden basis of K elements; P pairs each, rows y = x Uᵀ.
  rng = np.random.default_rng(2)
  truth = lu.unitary_from_basis(rng.normal(size=(M, K)), rng.normal(size=(K, N * N)) / 2)
  x = (rng.normal(size=(M, 8, N)) + 1j * rng.normal(size=(M, 8, N))).astype(np.complex64)
  y = jnp.einsum("jpb,jab->jpa", x, truth)
  layer = lu.LearnedBasisUnitaries(n=N, num_operators=M, basis_size=K)

  def loss(variables):
    return jnp.mean(jnp.abs(layer.apply(variables, x) - y) ** 2)

  @jax.jit
  def train(key, basis_rate):
    tx = optax.multi_transform({"params": optax.adam(basis_rate),
                                "coefficients": optax.adam(5e-2)}, lnn.collection_labels)
    variables = layer.init(key)
    state = tx.init(variables)

    def step(carry, _):
      variables, state = carry
      value, grads = jax.value_and_grad(loss)(variables)
      updates, state = tx.update(grads, state, variables)
      return (optax.apply_updates(variables, updates), state), value

    (final, _), losses = jax.lax.scan(step, (variables, state), None, length=40)
    return variables, final, losses, loss(final)

  start, final, losses, last = train(jax.random.key(3), 2e-2)
  assert np.all(np.isfinite(losses))
  assert last < 0.5 * losses[0]
  assert not np.allclose(start["params"]["basis"], final["params"]["basis"])
  assert not np.allclose(start["coefficients"]["coefficients"],
                         final["coefficients"]["coefficients"])
  # A zero rate for the basis: only the coefficients move.
  start, final, _, _ = train(jax.random.key(3), 0.0)
  np.testing.assert_array_equal(final["params"]["basis"], start["params"]["basis"])
  assert not np.allclose(final["coefficients"]["coefficients"],
                         start["coefficients"]["coefficients"])


@pytest.mark.parametrize("layer, x, match", [
    (lu.LearnedBasisUnitaries(3, 2, 4, basis_init="uniform"), None, "basis_init"),
    (lu.LearnedBasisUnitaries(3, 2, 10), None, "k ≤ 9"),
    (lu.LearnedBasisUnitaries(3, 2, 4, param_dtype=jnp.float16), None, "Half precision"),
    (lu.LearnedBasisUnitaries(3, 0, 4), None, "num_operators"),
    (lu.LearnedBasisUnitaries(3, 2, 4), np.ones((3, 3)), r"\(2, ..., 3\)"),
    (lu.LearnedBasisUnitaries(3, 2, 4), np.ones((2, 4)), r"x.shape=\(2, 4\)"),
])
def test_bad_configuration_or_input_raises_value_error(layer, x, match):
  with pytest.raises(ValueError, match=match):
    jax.eval_shape(lambda key: layer.init(key, x), jax.random.key(0))


def test_coefficients_of_another_shape_are_refused_not_broadcast():
  layer = lu.LearnedBasisUnitaries(2, 2, 3)  # C (2, 3), M (3, 4)
  for shape in ((3,), (1, 3), (5, 3)):  # one row would give every operator one unitary
    variables = {"params": {"basis": np.ones((3, 4), np.float32)},
                 "coefficients": {"coefficients": np.ones(shape, np.float32)}}
    with pytest.raises(ValueError, match=r"must be \(num_operators, basis_size\) = \(2, 3\)"):
      jax.eval_shape(layer.apply, variables)
  wrong_init = lu.LearnedBasisUnitaries(2, 2, 3, coefficient_init=lambda k, s, d: np.ones((5, 3)))
  with pytest.raises(ValueError, match=r"got \(5, 3\)"):
    jax.eval_shape(wrong_init.init, jax.random.key(0))
