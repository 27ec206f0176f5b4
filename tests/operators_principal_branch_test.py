"""The principal-branch approaches of the operator task against hand-written loops.

The references re-implement each refresh rule step by step with
`jax.scipy.linalg.expm` (Padé, not our spectral map) and, for re-centring, the
principal logarithm from the eigendecomposition of the unitary U itself
(`logm.lambdas_from_unitary`), not from iL.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from lie_unitary import algebra
from lie_unitary import logm
from lie_unitary import parametrizations
from lie_unitary.experiments import optimizers
from lie_unitary.experiments import runner
from lie_unitary.experiments.operators import config as config_lib
from lie_unitary.experiments.operators import data as ol_data
from lie_unitary.experiments.operators import experiment
from lie_unitary.experiments.operators import report
from scripts import detail_tables

pytestmark = pytest.mark.usefixtures("fast_compiles")  # compile-bound

# 12 steps of 2 pairs, validation every 6 steps, a refresh every 4: refreshes at steps
# 0, 4 and 8 fall inside and at the edge of the validation intervals.
_TASK = dict(n=3, generators=("haar",), num_train=24, num_val=10, num_test=10,
             val_subsample=10, real_dtype="float64")
_STEPS, _BATCH, _VAL_EVERY, _K = 12, 2, 6, 4


def _expm_unitary(lam):
  return jax.scipy.linalg.expm(algebra.lambdas_to_skew_hermitian(lam))


def _reference_curve(approach, optimizer, refresh_state="keep"):
  """Validation losses after steps 6 and 12, by a plain Python loop."""
  task = ol_data.TaskSpec(**_TASK)
  key = jax.random.key(7)
  keys = ol_data.replicate_keys(key, 0)
  target = ol_data.make_target(keys.target, 0, task)
  params, _ = parametrizations.get_parametrization(approach).init(keys.init, 3, jnp.float64)
  base = jnp.eye(3, dtype=jnp.complex128)
  opt_state = optimizer.init(params)
  order = jax.random.permutation(jax.random.fold_in(keys.order, 0), task.num_train)
  order = order.reshape(_STEPS, _BATCH)
  val = ol_data.example_pairs(keys.val, jnp.arange(task.val_subsample), target, task)

  @jax.jit
  def refresh(base, params, opt_state):
    if approach == "lie_rebased":
      base, params = base @ _expm_unitary(params["lam"]), {"lam": jnp.zeros(9)}
    else:
      params = {"lam": logm.lambdas_from_unitary(_expm_unitary(params["lam"]))}
    if refresh_state == "reset":
      opt_state = optimizer.init(params)
    return base, params, opt_state

  @jax.jit
  def step(base, params, opt_state, idx):
    x, y = ol_data.example_pairs(keys.train, idx, target, task)
    loss = lambda p: ol_data.squared_error_loss(base @ _expm_unitary(p["lam"]), x, y)
    updates, opt_state = optimizer.update(jax.grad(loss)(params), opt_state, params)
    params = optax.apply_updates(params, updates)
    return params, opt_state, ol_data.squared_error_loss(base @ _expm_unitary(params["lam"]), *val)

  curve = []
  for s in range(_STEPS):
    if s % _K == 0:
      base, params, opt_state = refresh(base, params, opt_state)
    params, opt_state, val_loss = step(base, params, opt_state, order[s])
    if (s + 1) % _VAL_EVERY == 0:
      curve.append(float(val_loss))
  return np.asarray(curve)


@pytest.mark.parametrize("approach,opt,refresh_state", [
    ("lie_rebased", "sgd", "keep"),
    ("lie_recentred", "rmsprop", "reset"),
])
@pytest.mark.slow
def test_refreshes_follow_the_hand_written_loop(x64, approach, opt, refresh_state):
  train = experiment.TrainSpec(approach, optimizer=opt, learning_rate=0.05,
                       batch_size=_BATCH, val_every=_VAL_EVERY, refresh_every=_K,
                       refresh_state=refresh_state)
  train_fn = experiment.make_train(ol_data.TaskSpec(**_TASK), train)
  out = jax.jit(lambda r: train_fn(jax.random.key(7), r))(jnp.int32(0))
  optimizer = optimizers.make_optimizer(opt, optimizers.schedule("constant", 0.05))
  ref = _reference_curve(approach, optimizer, refresh_state)
  assert ref[-1] < 0.9 * float(out["val_curve"][0])  # it trained
  np.testing.assert_allclose(np.asarray(out["val_curve"][1:]), ref, rtol=1e-9)


@pytest.mark.slow
def test_rebased_without_refresh_is_lie_algebra(x64):
  task = ol_data.TaskSpec(**_TASK)
  run = lambda a, k: jax.jit(lambda r: experiment.make_train(task, experiment.TrainSpec(
      a, batch_size=_BATCH, val_every=_VAL_EVERY, refresh_every=k))(jax.random.key(3), r))(
          jnp.int32(1))
  plain, rebased = run("lie_algebra", 0), run("lie_rebased", 0)
  np.testing.assert_allclose(rebased["val_curve"], plain["val_curve"], rtol=1e-12)


def test_spectrum_points_are_the_charts_spectrum(x64):
  task = ol_data.TaskSpec(**_TASK)
  out = jax.jit(lambda r: experiment.make_train(task, experiment.TrainSpec(
      "lie_algebra", batch_size=_BATCH, val_every=_VAL_EVERY))(jax.random.key(3), r))(
          jnp.int32(0))
  keys = ol_data.replicate_keys(jax.random.key(3), 0)
  lam0 = parametrizations.get_parametrization("lie_algebra").init(keys.init, 3,
                                                                  jnp.float64)[0]["lam"]
  for lam, i in ((lam0, 0), (out["params"]["lam"], -1)):
    theta = np.linalg.eigvalsh(1j * np.asarray(algebra.lambdas_to_skew_hermitian(lam)))
    gaps = np.abs(theta[:, None] - theta[None, :])[np.triu_indices(3, 1)]
    assert out["val_curve"].shape == out["theta_spread"].shape == (3,)
    np.testing.assert_allclose(out["theta_spread"][i], theta[-1] - theta[0], rtol=1e-10)
    np.testing.assert_allclose(out["theta_max_abs"][i], np.abs(theta).max(), rtol=1e-10)
    np.testing.assert_allclose(out["min_sinc"][i],
                               np.min(np.abs(np.sin(gaps / 2) / (gaps / 2))), rtol=1e-9)
    np.testing.assert_allclose(out["wide_share"][i], np.mean(gaps > np.pi))
  assert "theta_spread" not in jax.eval_shape(
      lambda r: experiment.make_train(task, experiment.TrainSpec("projection", batch_size=_BATCH,
                                                 val_every=_VAL_EVERY))(jax.random.key(3), r),
      jnp.int32(0))


def test_cosine_schedule_is_the_closed_form():
  opt = optimizers.make_optimizer("sgd", optimizers.schedule("cosine", 0.1, total_steps=10))
  params = {"lam": jnp.ones(4)}
  state = opt.init(params)
  steps = []
  for _ in range(10):
    u, state = opt.update({"lam": jnp.ones(4)}, state, params)
    steps.append(-float(u["lam"][0]))
  np.testing.assert_allclose(steps, 0.1 * 0.5 * (1 + np.cos(np.pi * np.arange(10) / 10)),
                             rtol=1e-6)
  with pytest.raises(ValueError, match="learning-rate schedule 'linear'"):
    optimizers.schedule("linear", 1e-3, 10)


def test_bad_settings_are_named():
  task = ol_data.TaskSpec(**_TASK)
  with pytest.raises(ValueError, match="refresh_state"):
    experiment.make_trainer(task, experiment.TrainSpec("lie_rebased", val_every=6,
                                                       refresh_state="zero"))
  with pytest.raises(ValueError, match="refresh_every"):
    experiment.make_trainer(task, experiment.TrainSpec("lie_rebased", val_every=6,
                                                       refresh_every=-1))
  with pytest.raises(ValueError, match="change of basis"):
    experiment.make_trainer(task, experiment.TrainSpec("lie_recentred", val_every=6), jnp.eye(9))
  for field, value in (("lr_schedule", "linear"), ("refresh_every", -3),
                       ("refresh_state", "zero")):
    config = config_lib.get_config("operators_smoke")
    config[field] = value
    with pytest.raises(runner.ConfigError, match=field):
      experiment.validate_config(config)


def test_unit_identity_names_only_the_settings_that_matter():
  config = config_lib.get_config("operators_smoke")
  config.approaches = ("lie_algebra", "lie_rebased")
  plain = {u.fields["approach"]: u.fields for u in experiment.units(config)}
  assert plain["lie_algebra"]["lr_schedule"] == "constant"
  assert "refresh_every" not in plain["lie_algebra"]
  assert plain["lie_rebased"]["refresh_every"] == config.refresh_every
  config.refresh_every = 7
  config.lr_schedule = "cosine"
  changed = {u.fields["approach"]: u for u in experiment.units(config)}
  assert changed["lie_algebra"].fields == dict(plain["lie_algebra"], lr_schedule="cosine")
  assert changed["lie_rebased"].fields["refresh_every"] == 7
  assert "cosine" in changed["lie_rebased"].name


def test_report_shows_the_approaches_the_schedule_and_the_floor_ratio():
  recs = []
  for approach, sched, loss in (("true", None, 0.01), ("lie_algebra", None, 1.0),
                                ("lie_rebased", None, 0.02), ("lie_rebased", "cosine", 0.011)):
    for r in range(2):
      rec = dict(kind="final", n=4, approach=approach, replicate=r, generator="haar",
                 optimizer="none" if approach == "true" else "rmsprop",
                 learning_rate=0.0 if approach == "true" else 1e-3, num_epochs=1,
                 basis_scale=0.0, test_loss=loss, final_val_loss=loss)
      if sched:
        rec["lr_schedule"] = sched
      recs.append(rec)
  text = report.markdown(recs)
  assert "## Test loss (rmsprop, lr 0.001)" in text
  assert "## Test loss (rmsprop, lr 0.001, cosine schedule)" in text
  assert "| 4 | lie_algebra | lie_rebased |" not in text
  ratios = "\n".join(detail_tables.operators_lines(recs))  # the floor ratios: the script's
  assert "| n | lie_algebra | lie_rebased |\n|---|---|---|\n| 4 | 100 | 2 |" in ratios
  assert "| n | lie_rebased |\n|---|---|\n| 4 | 1.1 |" in ratios


def test_orthonormal_chart_is_the_rebased_one_rescaled(x64):
  n = 3
  norms = np.sqrt(np.sum(np.abs(np.asarray(algebra.basis(n))) ** 2, axis=(1, 2)))
  from lie_unitary import principal_branch
  np.testing.assert_allclose(principal_branch.basis_norms(n, jnp.float64), norms)
  ortho = parametrizations.get_parametrization("lie_rebased_orthonormal")
  plain = parametrizations.get_parametrization("lie_rebased")
  key = jax.random.key(4)
  p, c = ortho.init(key, n, jnp.float64)
  q, d = plain.init(key, n, jnp.float64)
  # Same initial U; coordinates λ_j ‖T_j‖.
  np.testing.assert_allclose(ortho.to_unitary(p, c), _expm_unitary(q["lam"]), atol=1e-12)
  p2, c2 = ortho.refresh(p, c)
  np.testing.assert_allclose(ortho.to_unitary(p2, c2), _expm_unitary(q["lam"]), atol=1e-12)
  assert not np.any(np.asarray(p2["lam"]))
  lam = jnp.linspace(-0.3, 0.4, n * n)
  np.testing.assert_allclose(ortho.to_unitary({"lam": lam}, c2),
                             c2["base"] @ _expm_unitary(lam / norms), atol=1e-12)
