r"""Benchmarks derivatives through U(λ): ours vs Padé autodiff vs the paper's rule.

For each n, dtype, λ scale and batch (single, or vmapped over replicates) it times
jax.value_and_grad of C(λ) = Σ|U(λ) X - Y|² (X, Y: n × 20) for

  ours   unitary_from_lambdas(method="eigh"): one eigh, the O(n³) spectral rule
         (a custom_jvp; reverse mode runs its transpose),
  pade   autodiff through jax.scipy.linalg.expm (Padé + scaling and squaring),
  paper  the paper's per-parameter Jacobian, O(n⁵) (only n ≤ --paper_max_n),
  floor  a bare eigh of the same size plus four n×n matmuls: the cost of the
         rule with every overhead removed,

all in one run, and prints the ratios pade/ours, paper/ours and ours/floor. Forward
mode, for ours: `jvp` is jax.jvp of C in one random direction of λ (one directional
derivative, the unit of forward mode), `jacfwd` the whole gradient by jax.jacfwd
(n² directions; only n ≤ --jacfwd_max_n); jvp/vg = jvp_ms / ours_ms.

  python scripts/bench_expm.py                      # the full table (~30 min, 2 cores)
  python scripts/bench_expm.py --quick              # n ∈ {8, 32, 64}, complex64 (~2 min)
  python scripts/bench_expm.py --output=bench.json  # also write the rows as JSON

OPENBLAS_NUM_THREADS is set to 1 unless you set it: jaxlib's CPU eigh uses OpenBLAS,
whose thread pool fights XLA's on small machines (1.6-1.8× slower at n = 128).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json  # noqa: E402

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import lie_unitary as lu  # noqa: E402
from lie_unitary import paper_rule  # noqa: E402
from lie_unitary.experiments import benchmark  # noqa: E402

_N = flags.DEFINE_list("n_values", ["8", "20", "32", "64", "128", "256"], "Matrix sizes n.")
_DTYPES = flags.DEFINE_list("dtypes", ["complex64", "complex128"], "Complex dtypes.")
_SCALES = flags.DEFINE_list("scales", ["1/n", "1"],
                            "λ entry variances: '1/n' (N(0, 1/n)) and/or '1' (N(0, 1), the "
                            "paper's init).")
_BATCHES = flags.DEFINE_list("batches", ["1", "16"],
                             "1 = one λ; B > 1 = vmapped over B replicates.")
_PAPER_MAX_N = flags.DEFINE_integer("paper_max_n", 32, "Largest n for the O(n⁵) paper rule.")
_JACFWD_MAX_N = flags.DEFINE_integer("jacfwd_max_n", 32, "Largest n for jacfwd (n² jvps).")
_MIN_TIME = flags.DEFINE_float("min_time", 0.3, "Seconds to repeat each timing for.")
_QUICK = flags.DEFINE_bool("quick", False, "n ∈ {8, 32, 64}, complex64, batch 1: about a minute.")
_OUTPUT = flags.DEFINE_string("output", None, "Optional path for the rows as JSON.")

COLUMNS = ("n", "dtype", "scale", "batch", "ours_ms", "pade_ms", "paper_ms", "floor_ms",
           "pade/ours", "paper/ours", "ours/floor", "jvp_ms", "jacfwd_ms", "jvp/vg")


def _problem(key, n, batch, dtype, scale):
  real = jnp.finfo(dtype).dtype
  k_lam, k_x, k_y = jax.random.split(key, 3)
  std = (1.0 / n) ** 0.5 if scale == "1/n" else 1.0
  lam = std * jax.random.normal(k_lam, (batch, n * n), real)
  x = jax.random.normal(k_x, (n, 20), dtype)
  y = jax.random.normal(k_y, (n, 20), dtype)
  return lam, x, y


def _methods(x, y):
  loss_of_u = lambda u: jnp.sum(jnp.abs(u @ x - y) ** 2)

  def ours(lam):
    return loss_of_u(lu.unitary_from_lambdas(lam, method="eigh"))

  def pade(lam):
    return loss_of_u(jax.scipy.linalg.expm(lu.lambdas_to_skew_hermitian(lam)))

  def paper(lam):
    u, jac = paper_rule.paper_unitary_and_jacobian(lam)  # one eigh for both
    value, g_u = jax.value_and_grad(loss_of_u)(u)
    return value, paper_rule.gradient_from_jacobian(jac, g_u)

  def floor(lam):
    theta, w = jnp.linalg.eigh(1j * lu.lambdas_to_skew_hermitian(lam))
    m = w
    for _ in range(4):
      m = m @ w
    return jnp.sum(theta) + jnp.sum(jnp.real(m))

  def jvp(lam):
    # Any direction costs the same; a reversed λ is free to make and not a constant XLA folds.
    return jax.jvp(ours, (lam,), (jnp.flip(lam, -1),))

  grads = {"ours": jax.value_and_grad(ours), "pade": jax.value_and_grad(pade),
           "paper": paper, "floor": floor, "jvp": jvp, "jacfwd": jax.jacfwd(ours)}
  return grads


def _row(n, dtype, scale, batch):
  lam, x, y = _problem(jax.random.key(n), n, batch, jnp.dtype(dtype), scale)
  row = {"n": n, "dtype": dtype, "scale": scale, "batch": batch}
  for name, fn in _methods(x, y).items():
    if (name == "paper" and n > _PAPER_MAX_N.value) or (
        name == "jacfwd" and n > _JACFWD_MAX_N.value):
      continue
    fn = jax.jit(jax.vmap(fn) if batch > 1 else fn)
    arg = lam if batch > 1 else lam[0]
    row[f"{name}_ms"] = 1e3 * benchmark.time_call(fn, arg, min_time=_MIN_TIME.value)
  row["pade/ours"] = row["pade_ms"] / row["ours_ms"]
  row["ours/floor"] = row["ours_ms"] / row["floor_ms"]
  if "paper_ms" in row:
    row["paper/ours"] = row["paper_ms"] / row["ours_ms"]
  row["jvp/vg"] = row["jvp_ms"] / row["ours_ms"]
  return row


def main(argv):
  del argv
  if _QUICK.value:
    n_values, dtypes, batches = [8, 32, 64], ["complex64"], [1]
  else:
    n_values = [int(v) for v in _N.value]
    dtypes, batches = _DTYPES.value, [int(b) for b in _BATCHES.value]
  print(f"devices: {jax.devices()}  OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}",
        flush=True)
  rows = []
  for batch in batches:
    for dtype in dtypes:
      for scale in _SCALES.value:
        for n in n_values:
          rows.append(_row(n, dtype, scale, batch))
          print(benchmark.markdown_table(rows[-1:], COLUMNS).splitlines()[-1], flush=True)
  print()
  print(benchmark.markdown_table(rows, COLUMNS))
  if _OUTPUT.value:
    with open(_OUTPUT.value, "w") as f:
      json.dump({"devices": [str(d) for d in jax.devices()], "rows": rows}, f, indent=1)


if __name__ == "__main__":
  jax.config.update("jax_enable_x64", True)  # complex128 rows; complex64 rows stay float32
  app.run(main)
