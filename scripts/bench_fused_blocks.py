r"""The fused Pallas recurrence kernels' batch block, timed against the scan kernels.

For each (B, n) it times one forward + reverse pass (`jax.grad` of a sum over all
states) of `fused_*_recurrence` at each `--block_batch`, and of the scan kernel
(`elementwise_recurrence` / `modrelu_recurrence`) of the same shape, round-robin, best
of `--rounds`; it prints milliseconds per pass and each row's speed-up over scan.
All products run in full float32 (the fused kernels' precision), the scans too.

  python scripts/bench_fused_blocks.py                       # GPU: n 95, B 128/1024
  python scripts/bench_fused_blocks.py --batches=128 --blocks=16,32,64,128

Needs a GPU for the fused rows (on CPU they run interpreted; use tiny sizes there).
"""

import time

from absl import app
from absl import flags
import jax
import jax.numpy as jnp

from lie_unitary.nn import fused_recurrence
from lie_unitary.nn import recurrence

_N = flags.DEFINE_list("sizes", ["95"], "n: complex units (state 2n reals).")
_BATCH = flags.DEFINE_list("batches", ["128", "1024"], "Sequences per pass.")
_LENGTH = flags.DEFINE_integer("length", 1020, "Steps per sequence.")
_BLOCKS = flags.DEFINE_list("blocks", ["16", "32", "64", "128"], "block_batch values.")
_KINDS = flags.DEFINE_list("kinds", ["tanh", "modrelu"], "tanh and/or modrelu.")
_ROUNDS = flags.DEFINE_integer("rounds", 3, "Round-robin rounds; the best counts.")
_SECONDS = flags.DEFINE_float("seconds", 0.5, "Timing per row and round.")


def _pass(kind: str, block: int | None):
  """jit(grad) of sum(states) w.r.t. (W, projected) for one kernel; block None = scan."""
  def states(w, h0, p, bias):
    if kind == "modrelu":
      if block is None:
        return recurrence.modrelu_recurrence(w, h0, p, bias)
      return fused_recurrence.fused_modrelu_recurrence(w, h0, p, bias, block_batch=block)
    if block is None:
      return recurrence.elementwise_recurrence(w, h0, p, kind)
    return fused_recurrence.fused_elementwise_recurrence(w, h0, p, kind, block_batch=block)

  return jax.jit(jax.grad(lambda w, h0, p, bias: jnp.sum(states(w, h0, p, bias)), (0, 2)))


def _ms(fn, args, seconds: float) -> float:
  calls, start = 0, time.perf_counter()
  while calls == 0 or time.perf_counter() - start < seconds:
    jax.block_until_ready(fn(*args))
    calls += 1
  return (time.perf_counter() - start) / calls * 1e3


def main(argv):
  del argv
  print(f"backend: {jax.default_backend()} ({jax.devices()[0].device_kind})", flush=True)
  lines = ["| kind | n | B | kernel | ms per fwd+bwd | × scan |", "|---|---|---|---|---|---|"]
  for n in map(int, _N.value):
    for batch in map(int, _BATCH.value):
      keys = jax.random.split(jax.random.key(0), 3)
      w = jnp.linalg.qr(jax.random.normal(keys[0], (2 * n, 2 * n)))[0]
      h0 = jnp.zeros((batch, 2 * n))
      p = 0.1 * jax.random.normal(keys[1], (_LENGTH.value, batch, 2 * n))
      bias = 0.01 * jax.random.normal(keys[2], (n,))
      args = (w, h0, p, bias)
      for kind in _KINDS.value:
        blocks = [None] + [int(b) for b in _BLOCKS.value if int(b) <= max(16, batch)]
        fns = {b: _pass(kind, b) for b in blocks}
        for fn in fns.values():
          jax.block_until_ready(fn(*args))  # compile, warm up
        best = dict.fromkeys(fns, float("inf"))
        for _ in range(_ROUNDS.value):
          for b, fn in fns.items():
            best[b] = min(best[b], _ms(fn, args, _SECONDS.value))
        for b in blocks:
          label = "scan" if b is None else f"pallas, block_batch={b}"
          lines.append(f"| {kind} | {n} | {batch} | {label} | {best[b]:.2f} | "
                       f"{best[None] / best[b]:.2f} |")
          print(lines[-1], flush=True)
  print("\n".join(lines))


if __name__ == "__main__":
  with jax.default_matmul_precision("highest"):
    app.run(main)
