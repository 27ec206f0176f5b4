"""The guRNN's rebased cell (U = U₀ · U(λ)) and the RNN family's λ inits, refreshes
(re-centring, re-basing) and spectrum diagnostics, at smoke sizes."""

import functools

import jax
import jax.numpy as jnp
from jax.test_util import check_grads
import numpy as np
import pytest

from lie_unitary import algebra
from lie_unitary import nn as lnn
from lie_unitary import principal_branch
from lie_unitary.experiments import optimizers
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import config as rnn_configs
from lie_unitary.experiments.rnn import experiment as rnn

pytestmark = pytest.mark.usefixtures("fast_compiles")


def _expm(lam):
  """U(λ) = expm(L(λ)) by scipy's Padé expm of L = −i·H(λ), an independent route."""
  return jax.scipy.linalg.expm(-1j * algebra.lambdas_to_hermitian(lam))


def _model(rebased):
  cell = lnn.GURNNCell(3, beta=1.1, activation="tanh", h0="zeros", rebased=rebased,
                       param_dtype=jnp.float64)
  return lnn.SequenceModel(cell, 2, readout="all")


PLAIN, REBASED = _model(False), _model(True)
# One jitted forward pass per model (and one reverse pass of the rebased one) for both tests.
APPLY_PLAIN, APPLY_REBASED = jax.jit(PLAIN.apply), jax.jit(REBASED.apply)


def _inputs_and_variables():
  """Inputs (2, 3, 1) and the rebased model's initial variables (jitted: one compile)."""
  x = jax.random.normal(jax.random.key(1), (2, 3, 1), jnp.float64)
  return x, jax.jit(REBASED.init)(jax.random.key(0), x)


def _with_lambda(variables, lam):
  return {**variables, "params": {**variables["params"],
                                  "cell": {**variables["params"]["cell"], "lam": lam}}}


def test_rebased_cell_at_zero_lambda_is_the_plain_cell_at_the_base(x64):
  x, rb_vars = _inputs_and_variables()
  # At init the base is the identity, in its own collection, not a parameter.
  assert set(rb_vars) == {"params", lnn.BASE_COLLECTION}
  np.testing.assert_array_equal(rb_vars[lnn.BASE_COLLECTION]["cell"]["base"], np.eye(3))
  plain_vars = {"params": rb_vars["params"]}  # the same parameter tree serves the plain cell
  lam0 = plain_vars["params"]["cell"]["lam"]
  rb_vars = _with_lambda({**plain_vars, lnn.BASE_COLLECTION: {"cell": {"base": _expm(lam0)}}},
                         jnp.zeros_like(lam0))
  np.testing.assert_allclose(APPLY_REBASED(rb_vars, x), APPLY_PLAIN(plain_vars, x),
                             rtol=1e-12, atol=1e-12)


def test_gradients_reach_lambda_not_the_base(x64):
  x, variables = _inputs_and_variables()
  variables = {"params": variables["params"]}
  base = _expm(jax.random.normal(jax.random.key(2), (9,), jnp.float64))
  variables = {**variables, lnn.BASE_COLLECTION: {"cell": {"base": base}}}
  loss = lambda v: jnp.sum(APPLY_REBASED(v, x) ** 2)
  grads = jax.grad(loss)(variables)
  np.testing.assert_array_equal(grads[lnn.BASE_COLLECTION]["cell"]["base"], 0)
  assert np.abs(grads["params"]["cell"]["lam"]).max() > 1e-3
  # λ's gradient against finite differences of the loss.
  check_grads(lambda lam: loss(_with_lambda(variables, lam)),
              (variables["params"]["cell"]["lam"],), order=1, modes=["rev"])


def _config(refresh, every, **fields):
  config = rnn_configs.get_config("rnn_smoke")
  config.model = ("gurnn",)
  config.lambda_refresh, config.lambda_refresh_every = refresh, every
  for k, v in fields.items():
    config[k] = v
  return config


# One training program for the rebase test and the runner's records: the same spec.
REBASE = dict(lambda_refresh_state="reset", lambda_optimizer="rmsprop",
              val_every=3, val_size=20, eval_size=20, eval_batch_size=20)


@jax.jit
def _product(lam, base):
  return base @ jax.vmap(_expm)(lam)


def _unitary(variables):
  """U of a (stacked) state's variables: U₀ · expm(L(λ)) by scipy, per replicate
  (U₀ = I without a base: one compiled program for every state)."""
  lam = variables["params"]["cell"]["lam"]
  eye = jnp.broadcast_to(jnp.eye(8, dtype=jnp.complex64), (lam.shape[0], 8, 8))
  base = variables.get(lnn.BASE_COLLECTION, {"cell": {"base": eye}})["cell"]["base"]
  return _product(lam, base)


@pytest.mark.slow
def test_rebase_in_training_keeps_u_across_every_refresh():
  spec = rnn.make_unit(_config("rebase", 3, **REBASE), "gurnn", 10, 0).spec
  sharding = replicas_lib.replicate_sharding()
  exp = rnn.make_experiment(spec, sharding)
  ids = jax.device_put(jnp.arange(2, dtype=jnp.int32), sharding)  # as the runner's
  start = exp.init(ids)
  u_init = _unitary(start.params)
  lam_init = np.asarray(start.params["params"]["cell"]["lam"])
  # Updates 0, 1, 2: a refresh before update 0 only, so the base is U(λ_init).
  state, _ = exp.train_chunk(start, ids, 0, 3, None, None)
  base = np.asarray(state.params[lnn.BASE_COLLECTION]["cell"]["base"])
  np.testing.assert_allclose(base, _unitary({"params": {"cell": {"lam": lam_init}}}), atol=2e-5)
  np.testing.assert_allclose(base, u_init, atol=2e-5)
  u_before = np.asarray(_unitary(state.params))
  assert np.abs(u_before - base).max() > 1e-3  # three updates moved U
  # Update 3 starts with a refresh: the base moves to U(update 3's start), λ = 0 then.
  after = jax.vmap(functools.partial(rnn.refresh_state, spec))(state)
  np.testing.assert_allclose(_unitary(after.params), u_before, atol=2e-5)
  np.testing.assert_array_equal(after.params["params"]["cell"]["lam"], 0)
  new_base = np.asarray(after.params[lnn.BASE_COLLECTION]["cell"]["base"])
  gram = np.einsum("rji,rjk->rik", new_base.conj(), new_base)
  np.testing.assert_allclose(gram, np.broadcast_to(np.eye(8), gram.shape), atol=2e-6)
  # "reset": λ's RMSProp mean square restarts at its initial value 1.
  nu = [l for l in jax.tree.leaves(after.opt_state) if l.shape == (2, 64)]
  assert nu and all(np.all(np.asarray(l) == 1.0) for l in nu)
  assert not all(np.all(np.asarray(l) == 1.0)
                 for l in jax.tree.leaves(state.opt_state) if l.shape == (2, 64))
  state, _ = exp.train_chunk(state, ids, 3, 1, None, None)
  np.testing.assert_allclose(state.params[lnn.BASE_COLLECTION]["cell"]["base"], u_before,
                             atol=2e-5)


@pytest.mark.slow
def test_recentre_keeps_u_and_wraps_the_spectrum():
  spec = rnn.make_unit(_config("recentre", 4), "gurnn", 10, 0).spec
  optimizer = rnn.optimizer_for(spec)
  # λ ~ N(0, 1) at n = 8: iL's spectrum spans about ±2√16, beyond ±π.
  lam = jax.random.normal(jax.random.key(3), (2, 64))
  params = {"cell": {"lam": lam}}
  state = optimizers.TrainState({"params": params}, jax.vmap(optimizer.init)({"params": params}))
  theta = lambda p: np.linalg.eigvalsh(np.asarray(jax.vmap(algebra.lambdas_to_hermitian)(
      p["params"]["cell"]["lam"]), np.complex128))
  assert np.all(np.abs(theta(state.params)).max(axis=-1) > np.pi)
  after = jax.vmap(functools.partial(rnn.refresh_state, spec))(state)
  np.testing.assert_allclose(_unitary(after.params), _unitary(state.params), atol=2e-5)
  assert np.all(np.abs(theta(after.params)) <= np.pi + 1e-4)


def test_config_errors_name_the_field(tmp_path):
  bad = [("lambda_init", "uniform", "lambda_init"), ("lambda_refresh", "rebuild", "lambda_refresh"),
         ("lambda_refresh_every", 0, "lambda_refresh_every"),
         ("lambda_refresh_state", "drop", "lambda_refresh_state")]
  for field, value, match in bad:
    config = rnn_configs.get_config("rnn_smoke")
    config[field] = value
    with pytest.raises(runner.ConfigError, match=match):
      runner.train_and_evaluate(rnn, config, str(tmp_path / "w"), printer=lambda *_: None,
                                handle_signals=False)
  assert not (tmp_path / "w").exists()


def test_refresh_fields_enter_only_lambda_units_with_a_refresh():
  config = rnn_configs.get_config("rnn_smoke")
  plain = rnn.make_unit(config, "gurnn", 10, 0)
  assert "lambda_refresh" not in plain.fields
  config.lambda_refresh_every = 7  # no refresh: not part of the identity
  assert rnn.make_unit(config, "gurnn", 10, 0).id == plain.id
  config.lambda_refresh = "rebase"
  spec = rnn.make_unit(config, "gurnn", 10, 0).spec
  assert (spec.lambda_refresh, spec.lambda_refresh_every) == ("rebase", 7)
  assert "lambda_refresh" not in rnn.make_unit(config, "lstm", 10, 0).fields


def test_haar_init_has_every_phase_within_pi():
  spec = rnn.make_unit(_config("none", 1, lambda_init="haar"), "gurnn", 10, 0).spec
  init = rnn.make_model(spec).cell.lambda_init
  lam = jax.jit(init, static_argnums=1)(jax.random.key(0), (64,))
  theta = np.linalg.eigvalsh(np.asarray(algebra.lambdas_to_hermitian(lam), np.complex128))
  # The principal logarithm of a Haar unitary of size 8: phases spread over (−π, π].
  assert np.abs(theta).max() <= np.pi + 1e-5 and np.ptp(theta) > 2


@pytest.mark.slow
def test_val_records_hold_the_spectrum(tmp_path):
  config = _config("rebase", 3, **REBASE)  # the rebase test's program
  config.num_updates = 3
  runner.train_and_evaluate(rnn, config, str(tmp_path), printer=lambda *_: None,
                            handle_signals=False)
  recs = workdir_lib.read(tmp_path)
  val = {(r["replicate"], r["step"]): r for r in recs if r["kind"] == "val"}
  for replicate in (0, 1):
    start, later = val[(replicate, 0)], val[(replicate, 3)]
    # λ ~ N(0, 1), n = 8: iL's spectrum spans about ±2√16 (closed form 4√2 for its radius).
    assert 2 * np.pi < start["theta_spread"] < 20 and np.pi < start["theta_max_abs"] < 10
    assert 0 < start["wide_share"] <= 1 and 0 <= start["min_sinc"] < 0.5
    # Re-based before update 0: after three small steps from λ = 0 all gaps are small.
    assert later["theta_spread"] < 1 and later["wide_share"] == 0 and later["min_sinc"] > 0.9
  lstm = rnn.make_unit(config, "lstm", 10, 0).spec
  assert rnn.make_experiment(lstm, replicas_lib.replicate_sharding()).diagnostics is None
  with pytest.raises(ValueError, match="'lstm' has no recurrent matrix"):
    rnn.diagnostics(lstm, {}, {})
  with pytest.raises(ValueError, match="'lstm' with lambda_refresh = .* has no λ refresh"):
    rnn.refresh_state(lstm, None)


@pytest.mark.parametrize("lambda_optimizer", ["sgd", "rmsprop"])
def test_reset_restarts_lambda_statistics_only(lambda_optimizer):
  # λ with its own optimizer (optax.multi_transform, masked states) and a schedule.
  config = _config("recentre", 5, lambda_refresh_state="reset",
                   lambda_optimizer=lambda_optimizer, lr_drops=(7,))
  config.models.gurnn.lambda_learning_rate = 1e-3
  spec = rnn.make_unit(config, "gurnn", 10, 0).spec
  optimizer = rnn.optimizer_for(spec)
  params = {"params": {"cell": {"lam": jnp.ones(4), "v": jnp.ones(3)}}}
  _, opt_state = optimizer.update(jax.tree.map(lambda a: 3 * a, params),
                                  optimizer.init(params), params)
  opt_state = principal_branch.reset_optimizer_state(
      optimizer, opt_state, params, {"params": {"cell": {"lam": True, "v": False}}})
  nus = {}
  for path, leaf in jax.tree_util.tree_leaves_with_path(opt_state):
    keys = [getattr(k, "key", getattr(k, "name", None)) for k in path]
    if "nu" in keys:
      nus[keys[-1]] = np.asarray(leaf)
    if "count" in keys:
      assert int(leaf) == 1  # step counts (the schedule's) are kept
  # RMSProp's mean square, initial 1, decay 0.9, gradient 3: 0.9 + 0.1 · 9 = 1.8 kept for
  # v; λ's (its own RMSProp) back to 1.
  np.testing.assert_allclose(nus["v"], 1.8, rtol=1e-6)
  if lambda_optimizer == "rmsprop":
    np.testing.assert_array_equal(nus["lam"], 1.0)
  else:
    assert "lam" not in nus
