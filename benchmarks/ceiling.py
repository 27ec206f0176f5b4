r"""Each model's training and evaluation against the machine's own ceiling, in one run.

For each model of --models (default: the image task's guRNN, orthogonal RNN and LSTM at
--budget) and each device layout of --data_parallel (default 1 and 0: one device with
the whole batch, as the image configs run, and each batch split over every device),
it times, round-robin in one process:

- `train`: the experiments' training chunk (forward, backward, optimizer, data);
- `chain train`: the recurrence's products alone at the model's state size H, gate count
  G and batch, on the same devices: a scan h ← fold(h W) + p with W (H, G·H), a reverse
  scan δ ← tile(δ) Wᵀ + g and one W̄ = Σ hᵀ tile(δ), nothing else;
- `eval`: the experiments' evaluation (forward only) of one evaluation batch;
- `chain forward`: the forward scan alone at the evaluation batch, keeping the last state;
- `GEMM`: one S × S float32 matmul per device (--gemm_size), the machine's peak.

GFLOP/s counts the recurrent products only: 3 · 2 G H² per step and example in
training (forward, δ chain, W̄), 2 G H² in evaluation (docs/benchmarks.md, "The
ceiling"); `÷ chain` and `÷ GEMM` are a row's GFLOP/s over its layout's chain and GEMM.
"""

import itertools

from absl import flags
import jax
import jax.numpy as jnp

from benchmarks import rnn
from benchmarks import timing
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import data

_GEMM = flags.DEFINE_integer("gemm_size", 2048, "S of the S × S matmul that gives the peak.")
_EVAL = flags.DEFINE_bool("eval", True, "Also time evaluation against the forward chain.")
_UNROLL = flags.DEFINE_integer("chain_unroll", 1, "Time steps per iteration of the chains.")
flags.FLAGS.set_default("task", "permuted")
flags.FLAGS.set_default("data_parallel", ["1", "0"])

_GATES = {"lstm": 4}  # products per step are (B, H) @ (H, G·H)


flops_per_example = rnn.flops_per_example


def state_size(spec) -> int:
  """H: the recurrent state in reals (the complex-state models hold n units as 2n)."""
  return spec.hidden_size * (2 if spec.model in rnn_config.H0_MODELS else 1)


def gemm_variant(size: int, d: int):
  """One size × size float32 matmul on each of d devices; counts FLOPs / 1e9."""
  P = jax.sharding.PartitionSpec
  a = jax.random.normal(jax.random.key(0), (d, size, size), jnp.float32)
  a = jax.device_put(a, jax.sharding.NamedSharding(rnn.mesh(d), P("data")))
  program = jax.jit(lambda a: a @ a)
  return timing.blocking(program, a, items=d * 2.0 * size**3 / 1e9)


def eval_variant(programs: rnn.UnitPrograms):
  """The experiments' evaluation of one evaluation batch, as a variant counting examples."""
  exp, replicas, spec, sets = programs
  state = exp.init(replicas.ids)
  val_set = exp.source.val_sets(sets)["val"]
  return timing.blocking(exp.evaluate, state.params, val_set,
                         items=spec.eval_batch_size * spec.num_replicates)


def layout_rows(tokens: list[str], d: int) -> list[dict]:
  """The table rows of one device layout: every model, its chains, the GEMM peak."""
  variants, counts = {}, {}  # counts: name -> (FLOPs per item, chain name) or None
  devices = 0
  for token in tokens:
    config, model = rnn.config_for(rnn._TASK.value, 0, 0, token)
    T = 784 if rnn._TASK.value in data.IMAGE_TASKS else int(rnn._T.value[0])
    variants[f"{token} train"], spec = rnn.experiment_variant(config, model, T, d)
    H, G, devices = state_size(spec), _GATES.get(spec.model, 1), spec.data_parallel
    length = data.get_task(spec.task).length(spec.T)
    chain = f"chain train H={H} G={G} B={spec.batch_size}"
    if chain not in variants:
      variants[chain] = rnn.chain_variant(H, G, spec.batch_size, length, devices, True,
                                          _UNROLL.value)
      counts[chain] = (flops_per_example(G, H, length, True), chain)
    counts[f"{token} train"] = (flops_per_example(G, H, length, True), chain)
    if _EVAL.value and spec.task in data.IMAGE_TASKS:
      config, model = rnn.config_for(rnn._TASK.value, 0, 0, token)
      variants[f"{token} eval"] = eval_variant(rnn.unit_programs(config, model, T, d))
      forward = f"chain forward H={H} G={G} B={spec.eval_batch_size}"
      if forward not in variants:
        variants[forward] = rnn.chain_variant(H, G, spec.eval_batch_size, length, devices,
                                              False, _UNROLL.value)
        counts[forward] = (flops_per_example(G, H, length, False), forward)
      counts[f"{token} eval"] = (flops_per_example(G, H, length, False), forward)
  variants["GEMM"] = gemm_variant(_GEMM.value, devices)
  group = {"devices": devices}
  print(group, flush=True)
  samples = timing.compare(variants)
  rows = timing.rows(group, samples)
  gflops = {name: counts[name][0] / min(s) / 1e9 if name in counts else 1 / min(s)
            for name, s in samples.items()}
  for row in rows:
    name = row["variant"]
    row.pop(next(k for k in row if k.startswith("÷ ")))
    row["GFLOP/s"] = gflops[name]
    if name in counts:
      row["examples/s"] = 1e3 / row["best_ms"]
      row["÷ chain"] = gflops[name] / gflops[counts[name][1]]
    row["÷ GEMM"] = gflops[name] / gflops["GEMM"]
  return rows


def main(argv):
  del argv
  splits = rnn.use_devices()
  tokens = rnn._MODELS.value or (["gurnn", "orthogonal", "lstm"]
                                 if rnn._TASK.value in data.IMAGE_TASKS else ["gurnn_beta"])
  table = list(itertools.chain.from_iterable(layout_rows(tokens, d) for d in splits))
  timing.report(table, note=f"GFLOP/s of the recurrent products only; GEMM {_GEMM.value}²")
