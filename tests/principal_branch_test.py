"""Spectrum diagnostics, principal re-centring, init, re-basing and optimizer reset,
against numpy eigensolvers, scipy's expm, finite differences and closed forms."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
import scipy.linalg

import lie_unitary as lu
from lie_unitary import algebra
from lie_unitary import principal_branch as pb

pytestmark = pytest.mark.usefixtures("strict_rank_promotion")


# Jitted once per shape: eager calls would compile every primitive on its own.
_spectrum = jax.jit(pb.spectrum)
_stats = jax.jit(pb.spectrum_stats)
_wrap = jax.jit(pb.wrap_phases)
_principal = jax.jit(pb.principal_lambdas)
_reunitarize = jax.jit(pb.reunitarize)
_rebased = jax.jit(pb.rebased_unitary, static_argnames="method")
_rebase = jax.jit(pb.rebase, static_argnames="method")


def _normal(seed, shape):
  return np.random.default_rng(seed).standard_normal(shape)


def _basis(n):
  with jax.enable_x64(True):  # also for the float32 tests: a NumPy complex128 reference
    return np.asarray(algebra.basis(n, jnp.complex128))


def _skew(lam):
  """L(λ) from the dense basis (NumPy only)."""
  lam = np.asarray(lam, np.float64)
  return np.einsum("...j,jab->...ab", lam, _basis(math.isqrt(lam.shape[-1])))


def _lambdas_of(skew):
  """Coefficients of a skew-Hermitian matrix: λ_j = Re <T_j, L> / ‖T_j‖² (NumPy only)."""
  basis = _basis(skew.shape[-1])
  return (np.real(np.einsum("jab,...ab->...j", basis.conj(), skew))
          / np.linalg.norm(basis, axis=(-2, -1)) ** 2)


def _expm_ref(lam):
  """U(λ) by scipy's Padé expm."""
  return scipy.linalg.expm(_skew(lam))


def _unitarity_error(u):
  u = np.asarray(u)
  return np.linalg.norm(np.conj(np.swapaxes(u, -1, -2)) @ u - np.eye(u.shape[-1]), axis=(-2, -1))


def _diagonal_lambdas(lam_diag):
  """λ whose L = i·diag(lam_diag): the diagonal block comes first (`algebra.basis`)."""
  n = len(lam_diag)
  return np.concatenate([np.asarray(lam_diag, np.float64), np.zeros(n * n - n)])


def _sinc_half(gap):
  gap = np.asarray(gap, np.float64)
  return np.where(gap == 0, 1.0, np.sin(gap / 2) / np.where(gap == 0, 1.0, gap / 2))


def _pair_gaps(theta):
  return np.array([x - y for x, y in itertools.combinations(theta, 2)])


# spectrum and spectrum_stats


def test_spectrum_is_eigvalsh_of_il_and_gives_the_eigenvalues_of_u(x64):
  # std 2 at n = 4: phases well beyond π, so nothing is wrapped by accident.
  lam = 2.0 * _normal(0, (2, 16))
  theta = np.asarray(_spectrum(lam))
  assert theta.shape == (2, 4) and theta.dtype == np.float64
  assert np.max(np.abs(theta)) > np.pi
  np.testing.assert_allclose(theta, np.linalg.eigvalsh(1j * _skew(lam)), atol=1e-12)
  u = _expm_ref(lam)
  for b in range(2):
    # The eigenvalues of U as a multiset are the roots of its characteristic polynomial.
    np.testing.assert_allclose(np.poly(np.exp(-1j * theta[b])), np.poly(np.linalg.eigvals(u[b])),
                               atol=1e-10)


def test_spectrum_errors():
  with pytest.raises(ValueError, match="REAL"):
    pb.spectrum(jnp.zeros(4, jnp.complex64))
  with pytest.raises(ValueError, match="perfect square"):
    pb.spectrum(jnp.zeros(5))


def test_spectrum_stats_of_diagonal_charts(x64):
  # L = i·diag(a): iL = -diag(a), θ = sort(-a).
  a = np.array([0.3, -2.9, 1.7, 4.0])
  np.testing.assert_allclose(_spectrum(_diagonal_lambdas(a)), np.sort(-a), atol=1e-14)
  stats = _stats(_diagonal_lambdas(a))
  gaps = _pair_gaps(-a)
  np.testing.assert_allclose(stats.spread, 6.9, rtol=1e-14)
  np.testing.assert_allclose(stats.max_abs_phase, 4.0, rtol=1e-14)
  np.testing.assert_allclose(stats.min_sinc, np.min(np.abs(_sinc_half(gaps))), rtol=1e-12)
  np.testing.assert_allclose(stats.wide_share, np.mean(np.abs(gaps) > np.pi), rtol=1e-14)
  assert 0 < float(stats.wide_share) < 1
  assert all(np.asarray(x).dtype == np.float64 and np.shape(x) == () for x in stats)
  # θ = (-π, π, -0.2, -0.5): a gap of exactly 2π has gain 0; gaps 2π, π+0.2, π+0.5 are wide.
  stats = _stats(_diagonal_lambdas([np.pi, -np.pi, 0.2, 0.5]))
  np.testing.assert_allclose(stats.min_sinc, 0.0, atol=1e-15)
  np.testing.assert_allclose(stats.wide_share, 0.5, rtol=1e-14)
  np.testing.assert_allclose(stats.max_abs_phase, np.pi, rtol=1e-15)


def test_spectrum_stats_n1_and_batch_axes(x64):
  one = _stats(np.array([[2.5], [-7.0]]))
  np.testing.assert_allclose(one.spread, [0.0, 0.0])
  np.testing.assert_allclose(one.max_abs_phase, [2.5, 7.0])
  np.testing.assert_array_equal(one.min_sinc, [1.0, 1.0])
  np.testing.assert_array_equal(one.wide_share, [0.0, 0.0])
  lam = 1.5 * _normal(1, (2, 3, 16))
  stats = _stats(lam)
  theta = np.linalg.eigvalsh(1j * _skew(lam))
  for idx in itertools.product(range(2), range(3)):
    t = theta[idx]
    gaps = _pair_gaps(t)
    np.testing.assert_allclose(stats.spread[idx], t.max() - t.min(), rtol=1e-12)
    np.testing.assert_allclose(stats.max_abs_phase[idx], np.abs(t).max(), rtol=1e-12)
    np.testing.assert_allclose(stats.min_sinc[idx], np.abs(_sinc_half(gaps)).min(), rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(stats.wide_share[idx], np.mean(np.abs(gaps) > np.pi))
  assert all(np.shape(x) == (2, 3) for x in stats)


# The derivative claim of the module docstring.


def test_derivative_gain_along_an_off_diagonal_generator_is_sinc(x64):
  # L = -i·diag(θ); the generators at (r, s) move U with gain |sinc(Δ_rs / 2)|.
  theta = np.array([1.1, -2.0, 3.0, -3.2])  # includes a gap of 6.2, just below 2π
  n = theta.size
  pairs = list(zip(*np.triu_indices(n, 1)))
  m = len(pairs)
  # Forward mode, one tangent per coefficient: jac[..., j] = dU along T_j.
  jac = np.asarray(jax.jit(jax.jacfwd(lambda x: lu.unitary_from_lambdas(x, method="eigh")))(
      _diagonal_lambdas(-theta)))
  gap = theta[:, None] - theta[None, :]
  safe = np.where(gap == 0, 1.0, gap)
  # ∫₀¹ e^{tL} E e^{(1-t)L} dt, entry (i, j): E_ij e^{-iθ_j} (1 - e^{-iΔ_ij}) / (iΔ_ij).
  factor = np.exp(-1j * theta)[None, :] * np.where(gap == 0, 1.0,
                                                   (1 - np.exp(-1j * gap)) / (1j * safe))
  for k, (r, s) in enumerate(pairs):
    for block in (n + k, n + m + k):  # symmetric imaginary, then antisymmetric real
      e = _basis(n)[block]
      np.testing.assert_allclose(jac[..., block], e * factor, atol=1e-12)
      np.testing.assert_allclose(np.linalg.norm(jac[..., block]),
                                 abs(_sinc_half(theta[r] - theta[s])) * np.linalg.norm(e),
                                 rtol=1e-10, atol=1e-14)


def test_derivative_gain_in_a_rotated_eigenbasis_by_finite_differences(x64):
  theta = np.array([2.5, -1.0, 0.4, -3.6])
  n = theta.size
  w = _expm_ref(_normal(2, n * n))
  base = w @ np.diag(-1j * theta) @ w.conj().T
  jvp = jax.jit(lambda lam, d: jax.jvp(lambda v: lu.unitary_from_lambdas(v, method="eigh"),
                                       (lam,), (d,))[1])
  h = 1e-5
  for r, s in [(0, 1), (0, 3), (2, 3)]:
    e = np.zeros((n, n), complex)
    e[r, s] = e[s, r] = 1j
    x = w @ e @ w.conj().T  # the (r, s) generator in the eigenbasis of L
    du = (scipy.linalg.expm(base + h * x) - scipy.linalg.expm(base - h * x)) / (2 * h)
    gain = abs(_sinc_half(theta[r] - theta[s]))
    np.testing.assert_allclose(np.linalg.norm(du) / np.linalg.norm(x), gain, rtol=1e-7)
    np.testing.assert_allclose(jvp(_lambdas_of(base), _lambdas_of(x)), du, atol=1e-8)


# wrap_phases


def test_wrap_phases(x64):
  theta = np.random.default_rng(3).uniform(-np.pi, np.pi, 1000)
  np.testing.assert_array_equal(_wrap(theta), theta)
  for k in (-3, -1, 1, 2, 5):
    wrapped = np.asarray(_wrap(theta + 2 * np.pi * k))
    assert np.all(wrapped >= -np.pi) and np.all(wrapped < np.pi)
    np.testing.assert_allclose(wrapped, theta, atol=1e-13)
  wide = np.linspace(-40.0, 40.0, 1000)
  wrapped = np.asarray(_wrap(wide))
  assert np.all(wrapped >= -np.pi) and np.all(wrapped < np.pi)
  turns = (wide - wrapped) / (2 * np.pi)
  np.testing.assert_allclose(turns, np.round(turns), atol=1e-12)
  edges = np.asarray(_wrap(np.concatenate([[np.pi, -np.pi], np.zeros(998)])))
  np.testing.assert_array_equal(edges[:2], [-np.pi, -np.pi])
  with pytest.raises(ValueError, match="θ must be real; got dtype complex128"):
    pb.wrap_phases(np.ones(2, np.complex128))


# principal_lambdas


def test_principal_lambdas_keeps_u_and_wraps_the_spectrum(x64):
  lam = 2.0 * _normal(4, (2, 16))
  assert np.all(np.max(np.abs(_spectrum(lam)), axis=-1) > 2 * np.pi)
  new = _principal(lam)
  assert new.shape == lam.shape and new.dtype == jnp.float64
  np.testing.assert_allclose(_expm_ref(new), _expm_ref(lam), atol=1e-11)
  theta = np.asarray(_spectrum(new))
  assert np.all(np.abs(theta) <= np.pi + 1e-12)
  # Away from ±π the principal logarithm is unique: logm's must agree.
  assert np.min(np.pi - np.abs(theta)) > 0.05
  np.testing.assert_allclose(new, jax.jit(lu.lambdas_from_unitary)(_expm_ref(lam)), atol=1e-9)


def test_principal_lambdas_returns_principal_coordinates_bit_for_bit(x64):
  small, big = 0.2 * _normal(5, 16), 3.0 * _normal(6, 16)
  lam = np.stack([small, big])
  spread = np.max(np.abs(_spectrum(lam)), axis=-1)
  assert spread[0] < np.pi < spread[1]
  out = np.asarray(_principal(lam))
  np.testing.assert_array_equal(out[0], small)
  assert not np.allclose(out[1], big)
  np.testing.assert_allclose(_expm_ref(out[1]), _expm_ref(big), atol=1e-11)


def test_principal_lambdas_float32():
  lam = (2.0 * _normal(7, 16)).astype(np.float32)
  new = _principal(lam)
  assert new.dtype == jnp.float32
  np.testing.assert_allclose(_expm_ref(new), _expm_ref(lam), atol=5e-5)
  with pytest.raises(ValueError, match="perfect square"):
    pb.principal_lambdas(jnp.zeros(7))


# init_lambdas and lambda_initializer


def test_init_lambdas_shapes_and_schemes(x64):
  key = jax.random.key(8)
  for dtype in (jnp.float32, jnp.float64):
    for scheme in pb.INIT_SCHEMES:  # shapes and dtypes by tracing only
      out = jax.eval_shape(lambda k, s=scheme, d=dtype: pb.init_lambdas(k, 4, s, 1.0, d), key)
      assert out.shape == (16,) and out.dtype == dtype
    np.testing.assert_allclose(pb.init_lambdas(key, 4, "normal", 0.5, dtype),
                               0.5 * jax.random.normal(key, (16,), dtype), rtol=1e-6)
  zeros = pb.init_lambdas(key, 4, "zeros", dtype=jnp.float64)
  assert zeros.shape == (16,) and zeros.dtype == jnp.float64
  np.testing.assert_array_equal(_expm_ref(zeros), np.eye(4))
  np.testing.assert_array_equal(pb.init_lambdas(key, 4, "normal", 0.0), 0.0)


def test_haar_init_is_principal_and_unitary(x64):
  keys = jax.random.split(jax.random.key(9), 300)
  lam = jax.jit(jax.vmap(lambda k: pb.init_lambdas(k, 4, "haar", dtype=jnp.float64)))(keys)
  assert lam.shape == (300, 16) and lam.dtype == jnp.float64
  assert np.max(np.abs(np.linalg.eigvalsh(1j * _skew(lam)))) <= np.pi + 1e-9
  u = _expm_ref(lam)
  assert np.max(_unitarity_error(u)) < 1e-10
  # Haar: E|tr U|² = 1 for n ≥ 2 (Var = 1, so the mean of 300 has std ≈ 0.06), E tr U = 0.
  # N(0, 0.01²) would give |tr U|² ≈ 16, N(0, 1) about 1.6 at n = 4.
  tr = np.trace(u, axis1=-2, axis2=-1)
  assert abs(np.mean(np.abs(tr) ** 2) - 1.0) < 0.3
  assert abs(np.mean(tr)) < 0.25
  near_identity = _expm_ref(pb.init_lambdas(keys[0], 4, "normal", 0.01, jnp.float64))
  assert abs(np.trace(near_identity)) ** 2 > 15


def test_init_lambdas_errors():
  key = jax.random.key(0)
  with pytest.raises(ValueError, match="scheme"):
    pb.init_lambdas(key, 3, "uniform")
  for n in (0, -2, 2.0, True):
    with pytest.raises(ValueError, match="n must be a positive integer"):
      pb.init_lambdas(key, n)
  for std in (-1.0, float("nan"), float("inf"), "1", True):  # a string: not a TypeError
    with pytest.raises(ValueError, match="std must be a finite float ≥ 0"):
      pb.init_lambdas(key, 3, std=std)
  assert pb.init_lambdas(key, 3, std=np.float32(0.0)).shape == (9,)  # a NumPy real is one
  for dtype in (jnp.int32, jnp.complex64, jnp.float16, jnp.bfloat16):
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
      pb.init_lambdas(key, 3, dtype=dtype)
  for fn in (pb.spectrum, pb.principal_lambdas):
    with pytest.raises(ValueError, match="lam's dtype must be float32 or float64"):
      fn(jnp.ones(4, jnp.bfloat16))


def test_lambda_initializer(x64):
  key = jax.random.key(8)
  scaled = pb.lambda_initializer("normal", std=0.5)(key, (16,), jnp.float64)
  assert scaled.shape == (16,) and scaled.dtype == jnp.float64
  np.testing.assert_allclose(scaled, 0.5 * jax.random.normal(key, (16,), jnp.float64))
  zeros = pb.lambda_initializer("zeros")(key, (16,))
  assert zeros.dtype == jnp.float32
  np.testing.assert_array_equal(zeros, 0.0)
  init = pb.lambda_initializer("haar")
  with pytest.raises(ValueError, match=r"shape \(n²,\)"):
    init(key, (4, 4))
  with pytest.raises(ValueError, match="perfect square"):
    init(key, (5,))
  with pytest.raises(ValueError, match="scheme"):
    pb.lambda_initializer("bogus")
  for std in (-0.1, "1"):
    with pytest.raises(ValueError, match="std must be a finite float ≥ 0"):
      pb.lambda_initializer("normal", std=std)


# reunitarize


def test_reunitarize_squares_the_error(x64):
  u = _expm_ref(_normal(11, (2, 16)))
  perturbed = u + 1e-4 * (_normal(12, (2, 4, 4)) + 1j * _normal(13, (2, 4, 4)))
  before = _unitarity_error(perturbed)
  out = np.asarray(_reunitarize(perturbed))
  assert out.dtype == np.complex128 and out.shape == (2, 4, 4)
  assert np.all(before > 1e-4)
  assert np.all(_unitarity_error(out) <= before ** 2)
  # It approaches the polar factor of the input to second order.
  left, _, right = np.linalg.svd(perturbed)
  assert np.all(np.linalg.norm(out - left @ right, axis=(-2, -1)) <= before ** 2)
  with pytest.raises(ValueError, match=r"u must be square .*\(3,\)"):
    pb.reunitarize(np.ones(3))


# rebased_unitary and rebase


def test_rebased_unitary_and_rebase(x64):
  base = _expm_ref(_normal(13, (2, 16)))
  lam = 1.5 * _normal(14, (2, 16))
  expected = base @ _expm_ref(lam)
  np.testing.assert_allclose(_rebased(base, lam, method="eigh"), expected, atol=1e-12)
  new_base, new_lam = _rebase(base, lam, method="eigh")
  np.testing.assert_allclose(new_base, expected, atol=1e-12)
  assert new_base.dtype == jnp.complex128 and new_base.shape == (2, 4, 4)
  assert new_lam.dtype == jnp.float64 and new_lam.shape == (2, 16)
  np.testing.assert_array_equal(new_lam, 0.0)
  np.testing.assert_allclose(_rebased(new_base, new_lam, method="eigh"), expected, atol=1e-12)
  with pytest.raises(ValueError, match="base must be"):
    _rebased(np.eye(3, dtype=complex), lam[0], method="eigh")
  with pytest.raises(ValueError, match="base must be"):
    _rebase(np.ones(4, complex), lam[0], method="eigh")
  with pytest.raises(ValueError, match=r"base must have λ's precision \(complex128"):
    _rebased(np.eye(4, dtype=np.complex64), lam[0], method="eigh")  # not cast up in silence
  with pytest.raises(ValueError, match=r"batch axes \(3,\) and λ's \(2,\) do not broadcast"):
    _rebased(np.broadcast_to(np.eye(4, dtype=complex), (3, 4, 4)), lam, method="eigh")
  # λ as a list or of integers: a float λ of zeros (zeros_like(list) raised; int λ
  # gave int zeros beside a float base).
  for lam_like in ([0.0] * 16, np.zeros(16, np.int32)):
    new_base, new_lam = pb.rebase(np.eye(4, dtype=complex), lam_like, method="eigh")
    assert new_lam.dtype == jnp.float64 and new_lam.shape == (16,)


def test_gradient_at_zero_is_the_riemannian_gradient(x64):
  # f(λ) = Re tr(Cᴴ U₀ expm(L(λ))): at λ = 0, df = Re tr(Cᴴ U₀ dL) = Re <M, dL> with
  # M = U₀ᴴ C, so ∂f/∂λ_j = Re <M, T_j> = Re Σ conj(M_ab) (T_j)_ab: the projection of M
  # onto u(n), i.e. M's skew-Hermitian part in the (unnormalised) basis. At λ = 0 every
  # eigenvalue of L is repeated: the spectral ("eigh") derivative must still be exact.
  n = 4
  base = _expm_ref(_normal(15, n * n))
  c = _normal(16, (n, n)) + 1j * _normal(17, (n, n))

  def loss(lam):
    return jnp.real(jnp.sum(jnp.conj(c) * pb.rebased_unitary(base, lam, "eigh")))

  grad = np.asarray(jax.jit(jax.grad(loss))(np.zeros(n * n)))
  m = base.conj().T @ c
  basis = _basis(n)
  np.testing.assert_allclose(grad, [np.real(np.vdot(m, t)) for t in basis], atol=1e-12)
  # The same as the coefficients of the skew part (M - Mᴴ)/2, weighted by ‖T_j‖² (1 or 2).
  weights = np.linalg.norm(basis, axis=(-2, -1)) ** 2
  np.testing.assert_allclose(grad, weights * _lambdas_of(0.5 * (m - m.conj().T)), atol=1e-12)
  # And a finite difference along a random direction.
  v, h = _normal(18, n * n), 1e-6
  f = lambda lam: np.real(np.sum(c.conj() * (base @ _expm_ref(lam))))
  np.testing.assert_allclose(np.dot(grad, v), (f(h * v) - f(-h * v)) / (2 * h), rtol=1e-7)


# reset_optimizer_state


def _params():
  return {"lam": np.arange(1.0, 5.0, dtype=np.float32),
          "w": np.array([[0.5, -1.0], [2.0, 0.25]], np.float32)}


def _run_steps(optimizer, params, steps=3):
  state = optimizer.init(params)
  update = jax.jit(optimizer.update)
  for i in range(steps):
    grads = jax.tree.map(lambda p, i=i: np.sin(p * (i + 1)) + 0.3, params)
    _, state = update(grads, state, params)
  return state


def _leaves_equal(a, b):
  assert jax.tree.structure(a) == jax.tree.structure(b)
  return all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_reset_rmsprop_all_and_one_leaf():
  params = _params()
  optimizer = optax.rmsprop(1e-2, momentum=0.9, initial_scale=0.5)
  state = _run_steps(optimizer, params)
  fresh = optimizer.init(params)
  assert not _leaves_equal(state, fresh)
  reset = pb.reset_optimizer_state(optimizer, state, params)
  assert jax.tree.structure(reset) == jax.tree.structure(state)
  assert _leaves_equal(reset, fresh)
  # Only "lam": its statistics restart, "w"'s are kept.
  only = pb.reset_optimizer_state(optimizer, state, params, where={"lam": True, "w": False})
  flat_only = jax.tree_util.tree_flatten_with_path(only)[0]
  flat_state, flat_fresh = jax.tree.leaves(state), jax.tree.leaves(fresh)
  saw = set()
  for (path, leaf), old, new in zip(flat_only, flat_state, flat_fresh):
    key = jax.tree_util.keystr(path)
    if "'lam'" in key:
      np.testing.assert_array_equal(leaf, new)
      assert not np.array_equal(old, new)
      saw.add("lam")
    else:
      np.testing.assert_array_equal(leaf, old)
      saw.add("w")
  assert saw == {"lam", "w"}


def test_reset_refuses_a_state_of_other_params():
  params = _params()
  optimizer = optax.rmsprop(1e-2, momentum=0.9)
  state = optimizer.init(params)
  scalar_lam = {**params, "lam": np.float32(1.0)}  # would broadcast into lam's statistics
  with pytest.raises(ValueError, match=r"\['lam'\] has shape \(4,\), but optimizer.init"):
    pb.reset_optimizer_state(optimizer, state, scalar_lam)
  with pytest.raises(ValueError, match="is not optimizer's state for params"):
    pb.reset_optimizer_state(optimizer, state, {"lam": params["lam"]})


def test_reset_keeps_the_step_count_of_a_schedule():
  params = _params()
  schedule = optax.exponential_decay(1.0, transition_steps=1, decay_rate=0.5)
  optimizer = optax.chain(optax.scale_by_adam(), optax.scale_by_schedule(schedule))
  state = _run_steps(optimizer, params, steps=4)
  reset = pb.reset_optimizer_state(optimizer, state, params)
  adam, sched = reset[0], reset[1]
  assert int(adam.count) == 4 and int(sched.count) == 4
  assert _leaves_equal(adam.mu, jax.tree.map(jnp.zeros_like, params))
  assert _leaves_equal(adam.nu, jax.tree.map(jnp.zeros_like, params))
  # The next step is scaled by the schedule at step 4, not restarted at step 0.
  grads = jax.tree.map(jnp.ones_like, params)
  updates, _ = jax.jit(optimizer.update)(grads, reset, params)
  # Adam with fresh moments but count 4 -> 5: m = 0.1, v = 0.001, bias-corrected with
  # step 5; then the schedule's factor at step 4.
  m_hat, v_hat = 0.1 / (1 - 0.9 ** 5), 0.001 / (1 - 0.999 ** 5)
  np.testing.assert_allclose(updates["lam"], m_hat / (np.sqrt(v_hat) + 1e-8) * 0.5 ** 4,
                             rtol=1e-5)


def test_reset_with_multi_transform():
  params = _params()
  optimizer = optax.multi_transform({"adam": optax.adam(1e-2), "sgd": optax.sgd(1e-2, 0.9)},
                                    {"lam": "adam", "w": "sgd"})
  state = _run_steps(optimizer, params)
  fresh = optimizer.init(params)
  reset = pb.reset_optimizer_state(optimizer, state, params, where={"lam": True, "w": False})
  inner = reset.inner_states
  adam_old, sgd_old = state.inner_states["adam"].inner_state, state.inner_states["sgd"].inner_state
  adam_new, sgd_new = inner["adam"].inner_state, inner["sgd"].inner_state
  adam_fresh = fresh.inner_states["adam"].inner_state
  np.testing.assert_array_equal(adam_new[0].mu["lam"], adam_fresh[0].mu["lam"])
  np.testing.assert_array_equal(adam_new[0].nu["lam"], adam_fresh[0].nu["lam"])
  assert not np.array_equal(adam_old[0].mu["lam"], adam_fresh[0].mu["lam"])
  assert int(adam_new[0].count) == 3
  # "w" is not selected: its momentum trace is kept.
  assert _leaves_equal(sgd_new, sgd_old)
  assert not _leaves_equal(sgd_old, fresh.inner_states["sgd"].inner_state)
  everything = pb.reset_optimizer_state(optimizer, state, params)
  assert _leaves_equal(everything.inner_states["sgd"].inner_state,
                       fresh.inner_states["sgd"].inner_state)


def test_basis_norms_and_reunitarize_refuse_other_dtypes():
  np.testing.assert_allclose(pb.basis_norms(2), [1, 1, np.sqrt(2), np.sqrt(2)], rtol=1e-7)
  for dtype in (jnp.int32, jnp.bool_, jnp.float16, "foo"):  # int32 would truncate √2 to 1
    with pytest.raises(ValueError, match="dtype must be float32 or float64"):
      pb.basis_norms(2, dtype)
  for dtype in (jnp.float16, jnp.bfloat16):
    with pytest.raises(ValueError, match="u's dtype must be float32 or float64"):
      pb.reunitarize(jnp.eye(2, dtype=dtype))
