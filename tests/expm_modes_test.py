"""Both autodiff modes and both backends of the expm maps, against independent references.

References: central finite differences, `jax.test_util.check_grads`, scipy's expm of
the dense-basis matrix, and `jax.scipy.linalg.expm` differentiated by JAX (the "pade"
method). Compiles dominate the run time at these sizes, so each test compiles one
program for everything it checks.
"""

import functools

import jax
import jax.numpy as jnp
from jax.test_util import check_grads
import numpy as np
import pytest
import scipy.linalg

import lie_unitary as lu
from lie_unitary import expm

N = 3
MAPS = ["expm_skew_hermitian", "unitary_from_lambdas", "orthogonal_from_lambdas"]


def _complex(re_im):
  return jax.lax.complex(re_im[..., 0, :, :], re_im[..., 1, :, :])


def _map(name, method="eigh"):
  """The map of a REAL parameter (jacfwd and hessian want one): expm_skew_hermitian
  takes (Re L, Im L) stacked."""
  if name == "expm_skew_hermitian":
    return lambda x: expm.expm_skew_hermitian(_complex(x), method=method)
  return functools.partial(getattr(expm, name), method=method)


def _point(name, n=N):
  """A random parameter of the map."""
  shape = {"expm_skew_hermitian": (2, n, n), "unitary_from_lambdas": (n * n,),
           "orthogonal_from_lambdas": (n * (n - 1) // 2,)}[name]
  return np.random.default_rng(0).normal(size=shape)


def _as_real(u):
  """Re and Im stacked: jacrev and hessian want real outputs."""
  return jnp.stack([jnp.real(u), jnp.imag(u)]) if jnp.iscomplexobj(u) else u


def _direction(x, seed=5):
  return np.random.default_rng(seed).normal(size=x.shape).astype(x.dtype)


def _central_difference(f, x, v, step=1e-5):
  return (f(x + step * v) - f(x - step * v)) / (2 * step)


def _rel(a, b):
  a, b = np.asarray(a), np.asarray(b)
  return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def _repeated_eigenvalue_lambdas():
  """λ of W diag(i·[1, 1, -2]) Wᴴ for a random unitary W: a double eigenvalue, not 0.

  In numpy: λ_j = Re⟨T_j, L⟩ / ⟨T_j, T_j⟩ for the orthogonal dense basis T_j.
  """
  rng = np.random.default_rng(3)
  w, _ = np.linalg.qr(rng.normal(size=(N, N)) + 1j * rng.normal(size=(N, N)))
  skew = (w * 1j * np.array([1.0, 1.0, -2.0])) @ w.conj().T
  np.testing.assert_allclose(np.linalg.eigvalsh(1j * skew), [-1.0, -1.0, 2.0], atol=1e-12)
  basis = np.asarray(lu.basis(N))
  lam = np.real(np.einsum("jab,ab->j", basis.conj(), skew)) / np.sum(np.abs(basis) ** 2, (1, 2))
  np.testing.assert_allclose(np.tensordot(lam, basis, 1), skew, atol=1e-12)
  return lam


def _first_order_of(name, x, v):
  """jvp, linearize, central differences, jacfwd and jacrev of one map at (x, v)."""
  f = _map(name)
  f_real = lambda y: _as_real(f(y))
  _, tangent = jax.jvp(f, (x,), (v,))
  _, f_lin = jax.linearize(f, x)
  return {"tangent": tangent, "linearized": f_lin(v),
          "differences": _central_difference(f, x, v),
          "jacfwd": jax.jacfwd(f_real)(x), "jacrev": jax.jacrev(f_real)(x)}


@jax.jit
def _first_order(points, directions):
  """All three maps in one compiled program: {name: _first_order_of(...)}."""
  return {name: _first_order_of(name, points[name], directions[name]) for name in points}


@pytest.mark.parametrize("point", ["random", "zero", "repeated"])
def test_first_order_both_modes(x64, point):
  """jvp against central differences, linearize == jvp, jacfwd == jacrev, for all three
  maps, at a random point, at 0 (every eigenvalue equal: the sinc(0) case) and at a
  point with a double eigenvalue (for unitary_from_lambdas; the others at random)."""
  points = {name: _point(name) for name in MAPS}
  if point == "zero":
    points = {name: np.zeros_like(x) for name, x in points.items()}
  elif point == "repeated":
    points["unitary_from_lambdas"] = _repeated_eigenvalue_lambdas()
  out = _first_order(points, {name: _direction(x) for name, x in points.items()})
  for name in MAPS:
    got = out[name]
    assert np.all(np.isfinite(got["tangent"])) and np.all(np.isfinite(got["jacfwd"])), name
    assert _rel(got["tangent"], got["differences"]) <= 1e-8, name
    assert _rel(got["linearized"], got["tangent"]) <= 1e-13, name
    np.testing.assert_allclose(got["jacfwd"], got["jacrev"], atol=1e-12, err_msg=name)


def test_check_grads_second_order(x64):
  check_grads(jax.jit(_map("unitary_from_lambdas")), (_point("unitary_from_lambdas"),),
              order=2, modes=("fwd", "rev"))


def test_hessian_matches_differences_of_the_gradient(x64):
  """Through orthogonal_from_lambdas: the second order of expm_skew_hermitian's rule."""
  f = _map("orthogonal_from_lambdas")
  target = np.linspace(-1.0, 1.0, N * N).reshape(N, N)
  loss = lambda m: jnp.sum(jnp.sin(f(m) @ target))
  grad = jax.grad(loss)

  @jax.jit
  def run(m):
    fd = jax.vmap(lambda e: _central_difference(grad, m, e))(jnp.eye(m.size))
    return jax.hessian(loss)(m), fd

  hess, fd = map(np.asarray, run(_point("orthogonal_from_lambdas")))
  assert _rel(hess, fd) <= 1e-7
  np.testing.assert_allclose(hess, hess.T, atol=1e-10)


# --- backends -------------------------------------------------------------------------


def test_methods_agree_with_scipy_and_each_other(x64):
  """"eigh" and "pade": values against scipy.linalg.expm for all three maps (a batch of
  λ, real input to expm_skew_hermitian); forward-mode tangents (unitary_from_lambdas)
  and reverse-mode gradients (orthogonal_from_lambdas) against each other. The eigh
  derivatives are checked against differences above."""
  lam = _point("unitary_from_lambdas")
  lam = np.stack([lam, 0.3 * lam])  # a leading batch axis
  real = np.random.default_rng(2).normal(size=(N, N))
  mu = _point("orthogonal_from_lambdas")
  target = np.linspace(-1.0, 1.0, N * N).reshape(N, N)

  @jax.jit
  def run(lam, v, real, mu):
    out = {}
    for m in ("eigh", "pade"):
      f = functools.partial(lu.orthogonal_from_lambdas, method=m)
      loss = lambda a, f=f: (jnp.sum(jnp.sin(f(a) @ target)), f(a))
      (_, r), grad = jax.value_and_grad(loss, has_aux=True)(mu)
      out[m] = {"jvp": jax.jvp(functools.partial(lu.unitary_from_lambdas, method=m),
                               (lam,), (v,)),
                "real_input": lu.expm_skew_hermitian(real, method=m),
                "orthogonal": r, "grad": grad}
    return out

  out = run(lam, _direction(lam), real, mu)
  # References in numpy from the dense basis; so(n) is its last block (real parts).
  basis = np.asarray(lu.basis(N))
  expected = {
      "jvp": np.stack([scipy.linalg.expm(np.tensordot(l, basis, 1)) for l in np.asarray(lam)]),
      "real_input": scipy.linalg.expm(0.5 * (real - real.T)),
      "orthogonal": scipy.linalg.expm(np.tensordot(mu, basis[-mu.size:].real, 1))}
  for method in ("eigh", "pade"):
    got = dict(out[method], jvp=out[method]["jvp"][0])
    for key, value in expected.items():
      np.testing.assert_allclose(got[key], value, atol=1e-12, err_msg=f"{method} {key}")
    assert got["jvp"].dtype == got["real_input"].dtype == jnp.complex128
    assert got["orthogonal"].dtype == jnp.float64
  assert _rel(out["pade"]["jvp"][1], out["eigh"]["jvp"][1]) <= 1e-11
  assert _rel(out["pade"]["grad"], out["eigh"]["grad"]) <= 1e-11
  # The orthogonal output of "pade" comes from a real expm: real in float32 too.
  f32 = jax.eval_shape(functools.partial(lu.orthogonal_from_lambdas, method="pade"),
                       jax.ShapeDtypeStruct((3,), jnp.float32))
  assert f32.dtype == jnp.float32


def test_choose_method_rule():
  assert {expm.choose_method(n, b, "cpu") for n in (1, 8, 128, 512) for b in (1, 16)} == {"eigh"}
  assert [expm.choose_method(n, 1, backend) for n in (64, 127, 128, 512)
          for backend in ("gpu", "tpu")] == ["eigh"] * 4 + ["pade"] * 4
  assert {expm.choose_method(n, 2, "gpu") for n in (8, 128, 512)} == {"eigh"}
  assert expm.choose_method(256) == expm.choose_method(256, 1, jax.default_backend())
  # Real matrices: Padé on CPU for one matrix from n = 16 on; batches keep eigh.
  assert [expm.choose_method(n, 1, "cpu", real=True) for n in (8, 15, 16, 256)] == [
      "eigh", "eigh", "pade", "pade"]
  assert expm.choose_method(256, 16, "cpu", real=True) == "eigh"
  for bad in ({"n": 0}, {"n": 4, "batch_size": 0}, {"n": 4.0}, {"n": True}):
    with pytest.raises(ValueError, match="positive integer"):
      expm.choose_method(**bad)
  # "auto" on an empty batch: an empty result, not an error about a batch_size of 0.
  for f, width, shape in ((lu.unitary_from_lambdas, 4, (0, 2, 2)),
                          (lu.orthogonal_from_lambdas, 120, (0, 16, 16)),
                          (lambda mu: lu.semi_orthogonal_from_lambdas(mu, 4, 2), 5, (0, 4, 2))):
    assert jax.eval_shape(f, jnp.zeros((0, width))).shape == shape
  # And on 0 × 0 matrices, as every explicit method: an empty result, not an error about n.
  for method in expm.METHODS:
    hermitian, symmetric = jax.jit(lambda h, s: (lu.expm_skew_hermitian(h, method),
                                                 lu.expm_skew_symmetric(s, method)))(
        jnp.zeros((3, 0, 0), jnp.complex64), jnp.zeros((0, 0)))
    assert hermitian.shape == (3, 0, 0) and symmetric.shape == (0, 0)


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
@pytest.mark.parametrize("n, batch", [(2, ()), (128, ()), (128, (2,)), (128, (1, 1))])
def test_auto_traces_the_method_of_the_rule(monkeypatch, backend, n, batch):
  """"auto" asks choose_method with the batch size of the leading axes, at trace time."""
  monkeypatch.setattr(jax, "default_backend", lambda: backend)
  lam = jax.ShapeDtypeStruct(batch + (n * n,), jnp.float32)
  uses_eigh = lambda method: "eigh" in str(jax.make_jaxpr(
      lambda l: lu.unitary_from_lambdas(l, method=method))(lam))
  assert uses_eigh("eigh") and not uses_eigh("pade")
  assert uses_eigh("auto") == (expm.choose_method(n, int(np.prod(batch)), backend) == "eigh")


def test_expm_skew_symmetric_matches_scipy_in_both_methods(x64):
  s = np.random.default_rng(5).normal(size=(2, 4, 4))  # any real matrix
  skew = 0.5 * (s - np.swapaxes(s, -1, -2))
  want = np.stack([scipy.linalg.expm(a) for a in skew])

  @jax.jit  # one compile for values, gradients and tangents of both methods
  def run(s):
    out = {}
    for m in ("eigh", "pade"):
      loss = lambda x, m=m: jnp.sum(jnp.sin(lu.expm_skew_symmetric(x, method=m)))
      out[m] = (lu.expm_skew_symmetric(s, method=m), jax.grad(loss)(s),
                jax.jvp(loss, (s,), (jnp.ones_like(s),))[1])
    return out

  out = jax.tree.map(np.asarray, run(s))
  for m in ("eigh", "pade"):
    assert out[m][0].dtype == np.float64 and np.max(np.abs(out[m][0] - want)) <= 1e-12
  assert _rel(out["eigh"][1], out["pade"][1]) <= 1e-11
  assert abs(out["eigh"][2] - out["pade"][2]) <= 1e-11 * abs(out["pade"][2])
  # "auto" on 4×4 matrices takes eigh everywhere (n < 16, and a batch): traced only.
  assert jax.eval_shape(lu.expm_skew_symmetric, s).dtype == jnp.float64
  with pytest.raises(ValueError, match="real"):  # traced only: nothing compiles
    jax.eval_shape(lu.expm_skew_symmetric, jax.ShapeDtypeStruct((2, 2), jnp.complex64))
  with pytest.raises(ValueError, match="square"):
    jax.eval_shape(lu.expm_skew_symmetric, jax.ShapeDtypeStruct((2, 3), jnp.float32))


@pytest.mark.parametrize("call", [
    lambda m: lu.expm_skew_hermitian(jnp.zeros((2, 2)), method=m),
    lambda m: lu.expm_skew_symmetric(jnp.zeros((2, 2)), method=m),
    lambda m: lu.unitary_from_lambdas(jnp.zeros(4), method=m),
    lambda m: lu.orthogonal_from_lambdas(jnp.zeros(1), method=m),
])
@pytest.mark.parametrize("bad", ["Pade", "expm", None])
def test_bad_method_raises(call, bad):
  with pytest.raises(ValueError, match="'auto', 'eigh', 'pade'"):
    jax.eval_shape(lambda: call(bad))  # traced only: nothing compiles


@pytest.mark.parametrize("method", ["taylor", "eigh", "pade"])
def test_an_empty_batch_gives_an_empty_batch_in_every_method(method):
  # taylor took the max of an empty norm ("zero-size array to reduction operation").
  u = jax.eval_shape(lambda: lu.unitary_from_lambdas(jnp.zeros((0, 4)), method=method))
  r = jax.eval_shape(lambda: lu.orthogonal_from_lambdas(jnp.zeros((0, 3)), method=method))
  assert (u.shape, u.dtype, r.shape) == ((0, 2, 2), jnp.complex64, (0, 3, 3))
