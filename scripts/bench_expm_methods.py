r"""Where Padé and eigh cross: the timings behind `lie_unitary.expm.choose_method`.

For each n, batch and dtype it times, for both backends of `unitary_from_lambdas`
(method="eigh" and method="pade"), after compilation:

  vg   jax.value_and_grad of C(λ) = Σ|U(λ) X - Y|² (X, Y: n × 20), reverse mode;
  jvp  jax.jvp of the same C in one random direction, forward mode,

with the two methods interleaved in one process: each round times every function
(alternating their order) and the reported time is the median over rounds, so load
from other processes hits both alike. Prints pade/eigh ratios (< 1: Padé faster).

  python scripts/bench_expm_methods.py                    # n ∈ {4..32}, batch 1, 16
  python scripts/bench_expm_methods.py --map=orthogonal   # orthogonal_from_lambdas
  python scripts/bench_expm_methods.py --output=m.json

λ entries ~ N(0, 1/n) and N(0, 1) (the paper's initialisation; larger ‖λ‖ costs Padé
more squarings, eigh nothing).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from lie_unitary import expm  # noqa: E402
from lie_unitary.experiments import benchmark  # noqa: E402

_N = flags.DEFINE_list("n_values", ["4", "6", "8", "12", "16", "24", "32"], "Matrix sizes n.")
_DTYPES = flags.DEFINE_list("dtypes", ["complex64", "complex128"],
                            "Complex dtypes (orthogonal: the real ones of the same precision).")
_BATCHES = flags.DEFINE_list("batches", ["1", "16"], "1 = one λ; B > 1 = vmapped over B.")
_MAP = flags.DEFINE_enum("map", "unitary", ["unitary", "orthogonal"], "Which map to time.")
_SCALES = flags.DEFINE_list("scales", ["1/n", "1"],
                            "λ entry variances: '1/n' and/or '1' (the paper's initialisation).")
_ROUNDS = flags.DEFINE_integer("rounds", 9, "Interleaved rounds; medians over rounds.")
_ROUND_TIME = flags.DEFINE_float("round_time", 0.05, "Seconds per function per round.")
_OUTPUT = flags.DEFINE_string("output", None, "Optional path for the rows as JSON.")

METHODS = ("eigh", "pade")
COLUMNS = ("n", "dtype", "scale", "batch", "eigh_vg_ms", "pade_vg_ms", "vg pade/eigh",
           "eigh_jvp_ms", "pade_jvp_ms", "jvp pade/eigh")


def _functions(n, batch, dtype, scale):
  """The four jitted functions of one row and their argument."""
  real = jnp.finfo(dtype).dtype
  k_lam, k_dir, k_x, k_y = jax.random.split(jax.random.key(n), 4)
  size = n * n if _MAP.value == "unitary" else n * (n - 1) // 2
  std = (1.0 / n) ** 0.5 if scale == "1/n" else 1.0
  lam = std * jax.random.normal(k_lam, (batch, size), real)
  direction = jax.random.normal(k_dir, (batch, size), real)
  out_dtype = dtype if _MAP.value == "unitary" else real
  x = jax.random.normal(k_x, (n, 20), out_dtype)
  y = jax.random.normal(k_y, (n, 20), out_dtype)
  fns = {}
  for method in METHODS:
    if _MAP.value == "unitary":
      to_matrix = lambda l, m=method: expm.unitary_from_lambdas(l, method=m)
    else:
      to_matrix = lambda l, m=method: expm.orthogonal_from_lambdas(l, method=m)
    loss = lambda l, f=to_matrix: jnp.sum(jnp.abs(f(l) @ x - y) ** 2)
    vg = jax.value_and_grad(loss)
    jvp = lambda l, d, f=loss: jax.jvp(f, (l,), (d,))
    if batch > 1:
      vg, jvp = jax.vmap(vg), jax.vmap(jvp)
    fns[f"{method}_vg"] = (jax.jit(vg), (lam,) if batch > 1 else (lam[0],))
    fns[f"{method}_jvp"] = (jax.jit(jvp), (lam, direction) if batch > 1 else
                            (lam[0], direction[0]))
  return fns


def _interleaved_medians(fns):
  """Median over rounds of each function's median call time, in ms."""
  reps = {}
  for name, (fn, args) in fns.items():
    jax.block_until_ready(fn(*args))  # compile
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    reps[name] = max(3, min(500, int(_ROUND_TIME.value / max(time.perf_counter() - t0, 1e-6))))
  samples = {name: [] for name in fns}
  names = list(fns)
  for r in range(_ROUNDS.value):
    for name in names if r % 2 == 0 else names[::-1]:
      fn, args = fns[name]
      times = []
      for _ in range(reps[name]):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t0)
      samples[name].append(statistics.median(times))
  return {name: 1e3 * statistics.median(s) for name, s in samples.items()}


def _row(n, dtype, scale, batch):
  ms = _interleaved_medians(_functions(n, batch, jnp.dtype(dtype), scale))
  if _MAP.value == "orthogonal":
    dtype = str(jnp.finfo(jnp.dtype(dtype)).dtype)  # the real dtype of that run
  row = {"n": n, "dtype": dtype, "scale": scale, "batch": batch}
  for kind in ("vg", "jvp"):
    for method in METHODS:
      row[f"{method}_{kind}_ms"] = ms[f"{method}_{kind}"]
    row[f"{kind} pade/eigh"] = ms[f"pade_{kind}"] / ms[f"eigh_{kind}"]
  return row


def main(argv):
  del argv
  print(f"devices: {jax.devices()}  map={_MAP.value}  "
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS')}", flush=True)
  rows = []
  for batch in [int(b) for b in _BATCHES.value]:
    for dtype in _DTYPES.value:
      for scale in _SCALES.value:
        for n in [int(v) for v in _N.value]:
          rows.append(_row(n, dtype, scale, batch))
          print(benchmark.markdown_table(rows[-1:], COLUMNS).splitlines()[-1], flush=True)
  print()
  print(benchmark.markdown_table(rows, COLUMNS))
  if _OUTPUT.value:
    with open(_OUTPUT.value, "w") as f:
      json.dump({"devices": [str(d) for d in jax.devices()], "map": _MAP.value, "rows": rows},
                f, indent=1)


if __name__ == "__main__":
  jax.config.update("jax_enable_x64", True)  # complex128 rows; complex64 rows stay float32
  app.run(main)
