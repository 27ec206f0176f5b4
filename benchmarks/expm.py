r"""Derivatives through U(λ): the spectral rule (eigh) against Padé and the paper's rule.

Times, per (n, dtype, λ scale, batch), C(λ) = Σ|U(λ) X − Y|² (X, Y: n × 20) through
`unitary_from_lambdas` (--map=orthogonal: `orthogonal_from_lambdas`, real X, Y):
eigh / pade (value_and_grad by that method), paper (the O(n⁵) Jacobian), floor (one
eigh and four matmuls), eigh_jvp / pade_jvp (one jvp), jacfwd (n² jvps). Ratios to
`eigh`; batch B > 1 vmaps over B λ. docs/benchmarks.md says more.
"""

import itertools

from absl import flags
import jax
import jax.numpy as jnp

from benchmarks import timing
from lie_unitary import algebra
from lie_unitary import expm
from lie_unitary import paper_rule

_N = flags.DEFINE_list("n_values", ["8", "20", "32", "64", "128", "256"], "Matrix sizes n.")
_DTYPES = flags.DEFINE_list("dtypes", ["complex64", "complex128"],
                            "Complex dtypes (orthogonal: the real ones of that precision).")
_SCALES = flags.DEFINE_list("scales", ["1/n", "1"], "λ entry variances: '1/n' and/or '1'.")
_BATCHES = flags.DEFINE_list("batches", ["1", "16"], "1: one λ; B > 1: vmapped over B.")
_MAP = flags.DEFINE_enum("map", "unitary", ["unitary", "orthogonal"], "Which map to time.")
_VARIANTS = flags.DEFINE_list("variants", ["eigh", "pade", "paper", "floor", "eigh_jvp",
                                           "pade_jvp", "jacfwd"], "Variants (see above).")
_PAPER_MAX_N = flags.DEFINE_integer("paper_max_n", 32, "Largest n for the O(n⁵) paper rule.")
_JACFWD_MAX_N = flags.DEFINE_integer("jacfwd_max_n", 32, "Largest n for jacfwd (n² jvps).")


def _variants(n, batch, dtype, scale):
  """name -> jitted function of λ (batch > 1: vmapped), and λ."""
  unitary = _MAP.value == "unitary"
  real = jnp.finfo(dtype).dtype
  k_lam, k_x, k_y = jax.random.split(jax.random.key(n), 3)
  std = (1.0 / n) ** 0.5 if scale == "1/n" else 1.0
  lam = std * jax.random.normal(k_lam, (batch, n * n if unitary else n * (n - 1) // 2), real)
  x, y = (jax.random.normal(k, (n, 20), dtype if unitary else real) for k in (k_x, k_y))
  to_matrix = expm.unitary_from_lambdas if unitary else expm.orthogonal_from_lambdas
  loss_of = lambda m: jnp.sum(jnp.abs(m @ x - y) ** 2)
  loss = {m: (lambda l, m=m: loss_of(to_matrix(l, method=m))) for m in ("eigh", "pade")}

  def paper(l):
    u, jac = paper_rule.paper_unitary_and_jacobian(l)  # one eigh for both
    value, g_u = jax.value_and_grad(loss_of)(u)
    return value, paper_rule.gradient_from_jacobian(jac, g_u)

  def floor(l):
    theta, w = jnp.linalg.eigh(1j * algebra.lambdas_to_skew_hermitian(l))
    return jnp.sum(theta) + jnp.sum(jnp.real(w @ w @ w @ w @ w))  # four matmuls

  # Any direction costs the same; a reversed λ is free to make and not a constant XLA folds.
  jvp = lambda f: (lambda l: jax.jvp(f, (l,), (jnp.flip(l, -1),)))
  fns = {"eigh": jax.value_and_grad(loss["eigh"]), "pade": jax.value_and_grad(loss["pade"]),
         "paper": paper, "floor": floor, "eigh_jvp": jvp(loss["eigh"]),
         "pade_jvp": jvp(loss["pade"]), "jacfwd": jax.jacfwd(loss["eigh"])}
  skip = {"paper": not unitary or n > _PAPER_MAX_N.value, "floor": not unitary,
          "jacfwd": n > _JACFWD_MAX_N.value}
  out = {}
  for name in _VARIANTS.value:
    if not skip.get(name):
      fn = jax.jit(jax.vmap(fns[name]) if batch > 1 else fns[name])
      out[name] = timing.blocking(fn, lam if batch > 1 else lam[0])
  return out


def main(argv):
  del argv
  jax.config.update("jax_enable_x64", True)  # complex128 rows; complex64 rows stay float32
  table = []
  for batch, dtype, scale, n in itertools.product(map(int, _BATCHES.value), _DTYPES.value,
                                                 _SCALES.value, map(int, _N.value)):
    shown = dtype if _MAP.value == "unitary" else str(jnp.finfo(jnp.dtype(dtype)).dtype)
    group = {"n": n, "dtype": shown, "scale": scale, "batch": batch}
    print(group, flush=True)
    samples = timing.compare(_variants(n, batch, jnp.dtype(dtype), scale))
    table += timing.rows(group, samples, reference="eigh")
  timing.report(table, note=f"ms per call, map={_MAP.value}", map=_MAP.value)
