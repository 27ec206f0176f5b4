"""One case of `python -m benchmarks layers` in a fresh process (its peak memory is its own).

`python -m benchmarks.layers_case IMPL IN OUT BATCH REPEATS THREADS [MU_STD]` prints one JSON line
per record: the resident memory after the imports, then each phase's seconds and the
process's peak resident memory so far. Only the implementation's own library is imported.
"""

import json
import sys
import time

_TORCH_MAPS = ("householder", "matrix_exp", "cayley")


def _peak_gib() -> float:
  with open("/proc/self/status") as f:
    kib = next(int(line.split()[1]) for line in f if line.startswith("VmHWM"))
  return kib / 2**20


def _say(**record):
  print(json.dumps(record), flush=True)


def _best(fn, repeats: int) -> float:
  fn()  # warm-up: compilation, allocator
  best = float("inf")
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - start)
  return best


def _ours(n_in, n_out, batch, repeats, full, zero, rebased, mu_std=0.0):
  import jax
  import jax.numpy as jnp

  import lie_unitary as lu
  from lie_unitary import stiefel

  _say(rss_after_imports_gib=_peak_gib())
  x = jax.random.normal(jax.random.key(0), (batch, n_in), jnp.float32)
  import flax.linen as nn
  layer = lu.OrthogonalLinear(
      features=n_out, rebased=rebased,
      **({"lambda_init": nn.initializers.zeros} if zero else {}))
  if full:  # the n×n exponential for every shape: the map before the thin path
    n, k = max(n_in, n_out), min(n_in, n_out)
    weight = lambda mu: (stiefel.semi_orthogonal_from_lambdas(mu, n, k, thin=False)
                         if n_out >= n_in else
                         stiefel.semi_orthogonal_from_lambdas(mu, n, k, thin=False).T)
    apply = lambda p, x: x @ weight(p["params"]["mu"]).T
  else:
    apply = layer.apply
  start = time.perf_counter()
  params = jax.block_until_ready(layer.init(jax.random.key(1), x))
  _say(phase="init", seconds=time.perf_counter() - start, peak_gib=_peak_gib())
  if rebased and mu_std:  # a point between rebasings: μ ~ N(0, mu_std²)
    mu = params["params"]["mu"]
    params = {**params, "params": {"mu": mu_std * jax.random.normal(jax.random.key(2), mu.shape)}}
  forward = jax.jit(apply)
  # The gradient of the parameters only (a rebased layer's base is state, not trained).
  grad = jax.jit(jax.value_and_grad(
      lambda p, x: jnp.sum(apply({**params, "params": p["params"]}, x) ** 2)))
  for phase, fn in (("forward", forward), ("forward+grad", grad)):
    seconds = _best(lambda fn=fn: jax.block_until_ready(fn(params, x)), repeats)
    _say(phase=phase, seconds=seconds, peak_gib=_peak_gib())


def _pytorch(n_in, n_out, batch, repeats, orthogonal_map, threads):
  try:
    import torch
    from torch.nn.utils import parametrizations
  except ImportError:
    _say(error="PyTorch is not installed (pip install torch)")
    return
  torch.set_num_threads(threads)
  torch.manual_seed(0)
  _say(rss_after_imports_gib=_peak_gib(), torch=torch.__version__)
  x = torch.randn(batch, n_in)
  start = time.perf_counter()
  layer = parametrizations.orthogonal(torch.nn.Linear(n_in, n_out, bias=False),
                                      orthogonal_map=orthogonal_map)
  _say(phase="init", seconds=time.perf_counter() - start, peak_gib=_peak_gib())

  def forward():
    with torch.no_grad():
      layer(x)

  def grad():
    layer.zero_grad(set_to_none=True)
    layer(x).pow(2).sum().backward()

  for phase, fn in (("forward", forward), ("forward+grad", grad)):
    _say(phase=phase, seconds=_best(fn, repeats), peak_gib=_peak_gib())


def main(argv) -> None:
  """Runs the case named by argv (see the module docstring)."""
  impl, n_in, n_out, batch, repeats, threads = argv[1], *map(int, argv[2:7])
  mu_std = float(argv[7]) if len(argv) > 7 else 0.0
  if impl.startswith("ours"):
    _ours(n_in, n_out, batch, repeats, full=impl == "ours_full", zero=impl == "ours_zero",
          rebased=impl == "ours_rebased", mu_std=mu_std)
  else:
    _pytorch(n_in, n_out, batch, repeats, impl, threads)


if __name__ == "__main__":
  main(sys.argv)
