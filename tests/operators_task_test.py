"""Tests of the y = Ux + ε task: data against its definition, baselines, training."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lie_unitary as lu
from lie_unitary.experiments.operators import data as ol_data
from lie_unitary.experiments.operators import experiment

# Compile-bound (each test builds its own training or baseline program): measured
# 62 s -> 41 s for this file, cold compilation cache, most XLA optimisations skipped.
pytestmark = pytest.mark.usefixtures("fast_compiles")

_pairs = jax.jit(ol_data.example_pairs, static_argnums=3)  # a TaskSpec is hashable

_SMALL = dict(num_train=2_000, num_val=500, num_test=500, val_subsample=200)


def test_pairs_follow_the_definition_and_are_regenerated_from_their_index():
  n = 5
  task = ol_data.TaskSpec(n=n, generators=("haar",))
  u = lu.random_unitary(jax.random.key(1), n, "haar")
  key = jax.random.key(2)
  x, y = _pairs(key, jnp.arange(20_000), u, task)
  assert x.shape == y.shape == (20_000, n) and x.dtype == y.dtype == jnp.complex64
  x, y = np.asarray(x, np.complex128), np.asarray(y, np.complex128)
  eps = y - x @ np.asarray(u, np.complex128).T
  parts = np.stack([x.real, x.imag])
  np.testing.assert_allclose(parts.mean(), 0.0, atol=0.01)
  np.testing.assert_allclose(parts.std(), 1.0, rtol=0.01)
  np.testing.assert_allclose(np.stack([eps.real, eps.imag]).std(), 0.01, rtol=0.02)
  # Pair i depends on its index only, not on the batch it is drawn in.
  x7, y7 = _pairs(key, jnp.array([3, 7, 11]), u, task)
  # (Equal up to rounding: XLA may vectorise the normal transform differently.)
  np.testing.assert_allclose(np.asarray(x7[1]), x[7], rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(np.asarray(y7[1]), np.asarray(_pairs(
      key, jnp.array([7]), u, task)[1][0]), rtol=1e-6, atol=1e-6)


def test_real_pairs_are_real():
  task = ol_data.TaskSpec(n=4, field="real", generators=("haar",))
  r = ol_data.make_target(jax.random.key(0), 0, task)
  assert r.dtype == jnp.float32
  np.testing.assert_allclose(np.linalg.det(np.asarray(r, np.float64)), 1.0, atol=1e-5)
  x, y = _pairs(jax.random.key(1), jnp.arange(10), r, task)
  assert x.dtype == y.dtype == jnp.float32


@pytest.mark.parametrize("n", [3, 8])
def test_true_is_the_noise_floor_and_rand_matches_its_expectation(n):
  task = ol_data.TaskSpec(n=n, generators=("haar",))
  u = lu.random_unitary(jax.random.key(10 + n), n, "haar")
  v = lu.random_unitary(jax.random.key(20 + n), n, "haar")
  key = jax.random.key(3)
  true = float(ol_data.dataset_loss(u, key, 100_000, u, task))
  np.testing.assert_allclose(true, 2e-4 * n, rtol=0.02)  # E‖ε‖² = 2n·0.01²
  # E_x ‖(V - U) x‖² = 2‖V - U‖_F² for E|x_j|² = 2, plus the noise floor.
  diff = np.asarray(v, np.complex128) - np.asarray(u, np.complex128)
  expected = 2 * np.sum(np.abs(diff) ** 2) + 2e-4 * n
  np.testing.assert_allclose(float(ol_data.dataset_loss(v, key, 100_000, u, task)), expected,
                             rtol=0.03)


def test_rand_averages_to_4n_for_haar():
  n = 6
  task = ol_data.TaskSpec(n=n, generators=("haar",), **_SMALL)
  out = jax.jit(jax.vmap(lambda r: ol_data.make_baselines(task)(jax.random.key(0), r)))(
      jnp.arange(32))
  np.testing.assert_allclose(float(jnp.mean(out["rand"]["test_loss"])), 4 * n, rtol=0.08)


def test_least_squares_matches_numpy_on_the_training_pairs():
  n = 4
  task = ol_data.TaskSpec(n=n, generators=("qr",), num_train=700)
  u = lu.random_unitary(jax.random.key(5), n, "qr")
  key = jax.random.key(6)
  fit, _ = ol_data.closed_form_fits(key, u, task)
  fit = np.asarray(fit, np.complex128)
  x, y = ol_data.example_pairs(key, jnp.arange(700), u, task)
  ref_t, *_ = np.linalg.lstsq(np.asarray(x, np.complex128), np.asarray(y, np.complex128),
                              rcond=None)
  np.testing.assert_allclose(fit, ref_t.T, atol=2e-5)
  # Unconstrained: close to U, not exactly unitary.
  np.testing.assert_allclose(fit, np.asarray(u), atol=3e-3)


def _noisy_fit_setup(n, num_train, field="complex", noise_std=0.01):
  task = ol_data.TaskSpec(n=n, field=field, generators=("haar",), num_train=num_train,
                          noise_std=noise_std)
  target = ol_data.make_target(jax.random.key(7), 0, task)
  return task, target, jax.random.key(8)


def test_procrustes_recovers_a_noiseless_target_and_is_unitary():
  task, u, key = _noisy_fit_setup(5, 40, noise_std=0.0)
  _, fit = ol_data.closed_form_fits(key, u, task)
  fit = np.asarray(fit, np.complex128)
  np.testing.assert_allclose(fit, np.asarray(u, np.complex128), atol=2e-6)
  np.testing.assert_allclose(fit.conj().T @ fit, np.eye(5), atol=2e-6)
  task, r, key = _noisy_fit_setup(5, 40, field="real", noise_std=0.0)
  _, fit = ol_data.closed_form_fits(key, r, task)
  assert fit.dtype == jnp.float32
  np.testing.assert_allclose(np.asarray(fit), np.asarray(r), atol=2e-6)


@pytest.mark.parametrize("field", ["complex", "real"])
def test_procrustes_is_the_svd_polar_factor_of_the_accumulated_cross_matrix(field):
  task, u, key = _noisy_fit_setup(4, 30, field=field, noise_std=0.3)
  _, fit = ol_data.closed_form_fits(key, u, task)
  fit = np.asarray(fit, np.complex128)
  x, y = (np.asarray(a, np.complex128)
          for a in ol_data.example_pairs(key, jnp.arange(30), u, task))
  cross = y.T @ x.conj()                                        # Σ_i y_i x_iᴴ, in float64
  p, _, qh = np.linalg.svd(cross)
  np.testing.assert_allclose(fit, p @ qh, atol=1e-5)
  np.testing.assert_allclose(fit.conj().T @ fit, np.eye(4), atol=2e-6)
  # The same as the in-memory fit of `lie_unitary.procrustes_unitary`.
  x32, y32 = ol_data.example_pairs(key, jnp.arange(30), u, task)
  np.testing.assert_allclose(fit, np.asarray(lu.procrustes_unitary(x32, y32)), atol=1e-5)


def test_training_loss_orders_lstsq_procrustes_true_and_test_loss_true_procrustes_lstsq():
  """On the training pairs: lstsq (unconstrained) ≤ procrustes (the best unitary) ≤ true
  (a unitary), exactly. On fresh pairs, in expectation: the truth is the best, and the
  unitary fit (n² real parameters) beats least squares (2n²) when pairs are few."""
  n, num_train = 4, 12
  task, u, key = _noisy_fit_setup(n, num_train)
  lstsq, procrustes = ol_data.closed_form_fits(key, u, task)
  train = [float(ol_data.dataset_loss(m, key, num_train, u, task))
           for m in (lstsq, procrustes, u)]
  assert train[0] <= train[1] <= train[2], train
  task = ol_data.TaskSpec(n=n, generators=("haar",), num_train=num_train, num_val=100,
                          num_test=2_000)
  out = jax.jit(jax.vmap(lambda r: ol_data.make_baselines(task)(jax.random.key(0), r)))(
      jnp.arange(16))
  test = {a: float(jnp.mean(out[a]["test_loss"])) for a in ("true", "procrustes", "lstsq")}
  assert test["true"] < test["procrustes"] < test["lstsq"], test


@pytest.mark.slow
def test_restricted_training_moves_only_the_masked_coefficients():
  task = ol_data.TaskSpec(n=4, generators=("lie",), **_SMALL)
  train = experiment.TrainSpec("lie_restricted", optimizer="rmsprop", learning_rate=1e-2,
                       val_every=25)
  key = jax.random.key(0)
  out = jax.jit(lambda r: experiment.make_train(task, train)(key, r))(jnp.int32(0))
  init_key = jax.random.split(jax.random.fold_in(key, 0), 7)[5]  # _Keys.init
  params, constants = lu.get_parametrization("lie_restricted").init(init_key, 4)
  moved = np.asarray(out["params"]["lam"] != params["lam"])
  mask = np.asarray(constants["mask"], bool)
  assert moved.sum() > 0 and not np.any(moved & ~mask)
  assert mask.sum() == min(7 * 4, 16)


@pytest.mark.slow
def test_training_learns_and_projection_stays_unitary():
  task = ol_data.TaskSpec(n=3, generators=("haar",), **_SMALL)
  key = jax.random.key(4)
  for approach in ("lie_algebra", "projection"):
    train = experiment.TrainSpec(approach, optimizer="rmsprop", learning_rate=1e-2, num_epochs=2,
                         val_every=25)
    out = jax.jit(lambda r, a=train: experiment.make_train(task, a)(key, r))(jnp.int32(1))
    curve = np.asarray(out["val_curve"])
    assert curve.shape == (1 + 2 * 100 // 25,)
    assert curve[-1] < 0.1 * curve[0] and float(out["test_loss"]) < 0.5
    if approach == "projection":
      m = np.asarray(out["params"]["re"] + 1j * out["params"]["im"])
      np.testing.assert_allclose(m @ m.conj().T, np.eye(3), atol=1e-5)


def test_change_of_basis_needs_lie_algebra_and_steps_must_divide():
  task = ol_data.TaskSpec(n=3, **_SMALL)
  with pytest.raises(ValueError, match="change of basis"):
    experiment.make_train(task, experiment.TrainSpec("arjovsky", val_every=25), jnp.eye(9))
  with pytest.raises(ValueError, match="val_every"):
    experiment.make_train(task, experiment.TrainSpec("arjovsky", val_every=33))
  with pytest.raises(ValueError, match="field"):
    experiment.make_train(task, experiment.TrainSpec("so_algebra", val_every=25))


@pytest.mark.slow
def test_orthogonal_training_on_real_data():
  task = ol_data.TaskSpec(n=3, field="real", generators=("haar", "lie"), **_SMALL)
  train = experiment.TrainSpec("so_algebra", optimizer="rmsprop", learning_rate=5e-2, num_epochs=2,
                       val_every=25)
  out = jax.jit(lambda r: experiment.make_train(task, train)(jax.random.key(2), r))(jnp.int32(0))
  curve = np.asarray(out["val_curve"])
  assert curve[-1] < 0.2 * curve[0]
  r = np.asarray(lu.orthogonal_from_lambdas(out["params"]["mu"]), np.float64)
  np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-5)
  np.testing.assert_allclose(np.linalg.det(r), 1.0, atol=1e-5)
