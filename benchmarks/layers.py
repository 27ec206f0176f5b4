r"""Orthogonal layers at the sizes people use, beside PyTorch's three maps, with peak memory.

  layers [--shapes=30000x50,1024x1024] [--impls=ours,householder,matrix_exp,cayley]
         [--limit_s=120] [--memory_gib=6] [--repeats=3] [--batch=64] [--rebased_mu_std=0]

For every shape IN x OUT and implementation, one fresh subprocess times, on a batch of
float32 inputs:

- init: one call that creates the layer's parameters, as a user's first call does
  (ours: `OrthogonalLinear(OUT).init(key, x)`, not jitted, so it includes tracing and
  forming W once; PyTorch: `nn.Linear` plus `parametrizations.orthogonal`);
- forward: y = layer(x) (ours jitted; PyTorch under `torch.no_grad`);
- forward + gradient: the gradient of Σy² with respect to the parameters, its forward
  included (ours `jax.value_and_grad`, jitted; PyTorch one forward and `backward`).

Forward and gradient are the best of --repeats calls after one warm-up (compilation)
call. Peak memory is the subprocess's peak resident set (VmHWM of /proc/self/status)
after the last phase it finished: the imports' own footprint is in it, and is printed
as "rss after imports". A case still running after --limit_s, or past --memory_gib of
resident memory (polled every 50 ms), is stopped and its unfinished phases read
"> limit" / "> memory". PyTorch runs with --torch_threads threads; jax with its default
(all cores). Implementations: ours (`lie_unitary.nn.OrthogonalLinear`, its default
init μ ~ N(0, 1): a random point, far from the identity), ours_zero (the same at μ = 0,
`lambda_init=zeros`: PyTorch's maps start at their chart's origin, exp(0) or
cayley(0), with the random weight in a fixed base, so this is the point they are timed
at), ours_full (the same map through the n×n exponential, `thin=False`: the map
before the thin path), ours_rebased (square shapes: `rebased=True`, W = W₀ · R(μ) with
the random W₀ drawn as R(μ₀), μ₀ ~ N(0, 1), and μ = 0: PyTorch's point and
construction; with --rebased_mu_std=σ at μ ~ N(0, σ²), a point between rebasings,
where ‖A(μ)‖₁ ≈ 0.8 σ N sets the Taylor degree), householder, matrix_exp, cayley
(`torch.nn.utils.parametrizations.orthogonal`).
PyTorch is not a dependency: without it its rows say so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from absl import flags

from benchmarks import timing

_SHAPES = flags.DEFINE_list(
    "shapes", ["500x50", "1000x50", "2000x50", "3000x50", "30000x50", "20000x64", "64x20000",
               "256x256", "1024x1024", "2048x2048"], "Layer shapes IN x OUT.")
_IMPLS = flags.DEFINE_list("impls", ["ours", "householder", "matrix_exp", "cayley"],
                           "Implementations: ours, ours_zero, ours_full, ours_rebased, "
                           "householder, matrix_exp, cayley.")
_BATCH = flags.DEFINE_integer("batch", 64, "Inputs per call.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed calls after the warm-up; the best counts.")
_LIMIT = flags.DEFINE_float("limit_s", 120.0, "Seconds one case (all its phases) may run.")
_MEMORY = flags.DEFINE_float("memory_gib", 6.0, "Resident GiB a case may reach.")
_TORCH_THREADS = flags.DEFINE_integer("torch_threads", 2, "torch.set_num_threads.")
_MU_STD = flags.DEFINE_float("rebased_mu_std", 0.0,
                             "ours_rebased at μ ~ N(0, this²) instead of μ = 0: a point "
                             "between rebasings.")

_PHASES = ("init", "forward", "forward+grad")
_TORCH_MAPS = ("householder", "matrix_exp", "cayley")


def _rss_gib(pid: int) -> float:
  try:
    with open(f"/proc/{pid}/status") as f:
      kib = next((int(line.split()[1]) for line in f if line.startswith("VmRSS")), 0)
  except OSError:
    return 0.0
  return kib / 2**20


def _run_case(impl, n_in, n_out) -> dict:
  """Runs one case in a subprocess under the time and memory limits; its records."""
  command = [sys.executable, "-m", "benchmarks.layers_case", impl, str(n_in), str(n_out),
             str(_BATCH.value), str(_REPEATS.value), str(_TORCH_THREADS.value),
             str(_MU_STD.value)]
  proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  start, stopped = time.perf_counter(), None
  while proc.poll() is None:
    if time.perf_counter() - start > _LIMIT.value:
      stopped = "> limit"
    elif _rss_gib(proc.pid) > _MEMORY.value:
      stopped = "> memory"
    if stopped:
      proc.kill()
      break
    time.sleep(0.05)
  out, err = proc.communicate()
  records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
  result = {"stopped": stopped, "phases": {}, "peak_gib": None, "imports_gib": None}
  for r in records:
    if "phase" in r:
      result["phases"][r["phase"]] = r["seconds"]
      result["peak_gib"] = r["peak_gib"]
    result["imports_gib"] = r.get("rss_after_imports_gib", result["imports_gib"])
    result["error"] = r.get("error", result.get("error"))
  if proc.returncode and not stopped and not result.get("error"):
    result["error"] = (err.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
  return result


def _cell(result, phase) -> str | float:
  if phase in result["phases"]:
    return 1e3 * result["phases"][phase]
  return result["stopped"] or result.get("error") or "–"


def main(argv):
  del argv
  table = []
  for shape in _SHAPES.value:
    n_in, n_out = (int(s) for s in shape.lower().split("x"))
    for impl in _IMPLS.value:
      if impl not in ("ours", "ours_zero", "ours_full", "ours_rebased") + _TORCH_MAPS:
        raise SystemExit(f"unknown implementation {impl!r}")
      result = _run_case(impl, n_in, n_out)
      row = {"shape": f"{n_in} -> {n_out}", "impl": impl}
      row.update({f"{p} ms": _cell(result, p) for p in _PHASES})
      row["peak GiB"] = result["peak_gib"]
      row["rss after imports GiB"] = result["imports_gib"]
      print(row, flush=True)
      table.append(row)
  flags.FLAGS.rounds = _REPEATS.value  # the report's header says "best of --rounds"
  timing.report(table, note=(f"batch {_BATCH.value}, float32, timed calls after a warm-up, "
                             f"limit {_LIMIT.value:g} s and {_MEMORY.value:g} GiB a case, "
                             f"PyTorch {_TORCH_THREADS.value} threads"))
