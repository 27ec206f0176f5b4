r"""Orthogonal layers side by side: lie_unitary (JAX) vs PyTorch and geotorch, same process.

Times forward + backward (the gradient of Σ y² with respect to the layer's parameters,
y = layer(x), x a batch of 128 real vectors) of an orthogonal layer

  lie_unitary        `lie_unitary.OrthogonalLinear` (flax linen), jitted value_and_grad;
  torch matrix_exp   `torch.nn.utils.parametrizations.orthogonal(nn.Linear(...),
                     orthogonal_map="matrix_exp")`;
  torch default      the same with PyTorch's default map ("matrix_exp" for square
                     weights, "householder" for rectangular ones);
  geotorch           `geotorch.orthogonal(nn.Linear(...), "weight")` (its default,
                     the exponential trivialization),

for each layer shape, interleaving the methods round by round so that every one sees
the same machine load, and prints the median milliseconds per step and the ratio
of each method's time to lie_unitary's.

PyTorch and geotorch are NOT dependencies of lie_unitary; run this in a separate
environment that has both, with lie_unitary installed beside them:

  python -m venv /tmp/cmp && /tmp/cmp/bin/pip install torch geotorch -e .
  OPENBLAS_NUM_THREADS=1 /tmp/cmp/bin/python scripts/bench_vs_torch.py

Both libraries use every core by default (XLA's thread pool; torch's intra-op
threads); OPENBLAS_NUM_THREADS is set to 1 unless you set it, because jaxlib's CPU
eigh uses OpenBLAS, whose thread pool fights XLA's on small machines.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import statistics  # noqa: E402
import time  # noqa: E402

from absl import app  # noqa: E402
from absl import flags  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import lie_unitary as lu  # noqa: E402

_SHAPES = flags.DEFINE_list("shapes", ["256x256", "512x128"],
                            "Layer shapes IN x OUT (input features x output features).")
_BATCH = flags.DEFINE_integer("batch", 128, "Batch size.")
_ROUNDS = flags.DEFINE_integer("rounds", 7, "Interleaved rounds; the median is reported.")
_MIN_TIME = flags.DEFINE_float("min_time", 0.3, "Seconds each method runs per round.")


def _time_per_call(step, min_time):
  """Milliseconds per call, repeating `step` for at least min_time seconds."""
  count, start = 0, time.perf_counter()
  while True:
    step()
    count += 1
    elapsed = time.perf_counter() - start
    if elapsed >= min_time:
      return 1e3 * elapsed / count


def _jax_step(n_in, n_out, batch):
  model = lu.OrthogonalLinear(features=n_out)
  x = jax.random.normal(jax.random.key(0), (batch, n_in), jnp.float32)
  params = model.init(jax.random.key(1), x)

  @jax.jit
  def value_and_grad(params, x):
    return jax.value_and_grad(lambda p: jnp.sum(model.apply(p, x) ** 2))(params)

  def step():
    jax.block_until_ready(value_and_grad(params, x))

  step()  # compile
  return step


def _torch_steps(n_in, n_out, batch):
  import geotorch
  import torch
  from torch.nn.utils import parametrizations

  torch.manual_seed(0)
  x = torch.randn(batch, n_in)

  def make(layer):
    def step():
      layer.zero_grad(set_to_none=True)
      loss = layer(x).pow(2).sum()
      loss.backward()
    step()
    return step

  linear = lambda: torch.nn.Linear(n_in, n_out, bias=False)
  geo = linear()
  geotorch.orthogonal(geo, "weight")  # registers the parametrization in place
  steps = {
      "torch matrix_exp": make(parametrizations.orthogonal(linear(), orthogonal_map="matrix_exp")),
      "geotorch": make(geo),
  }
  if n_in != n_out:  # for square weights the default is matrix_exp, timed above
    steps["torch default (householder)"] = make(parametrizations.orthogonal(linear()))
  return steps


def main(argv):
  del argv
  import torch  # fail early, with the import error

  print(f"jax {jax.__version__} on {jax.devices()[0].platform}; torch {torch.__version__} "
        f"({torch.get_num_threads()} threads); batch {_BATCH.value}; "
        f"median of {_ROUNDS.value} interleaved rounds, ms per forward + backward")
  for shape in _SHAPES.value:
    n_in, n_out = (int(s) for s in shape.lower().split("x"))
    steps = {"lie_unitary": _jax_step(n_in, n_out, _BATCH.value)}
    steps.update(_torch_steps(n_in, n_out, _BATCH.value))
    times = {name: [] for name in steps}
    for _ in range(_ROUNDS.value):
      for name, step in steps.items():
        times[name].append(_time_per_call(step, _MIN_TIME.value))
    ours = statistics.median(times["lie_unitary"])
    print(f"\n{n_in} -> {n_out}")
    for name, ts in times.items():
      med = statistics.median(ts)
      print(f"  {name:30s} {med:9.3f} ms   {med / ours:5.2f}× lie_unitary   "
            f"(spread {np.min(ts):.3f}-{np.max(ts):.3f})")


if __name__ == "__main__":
  app.run(main)
