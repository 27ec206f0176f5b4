r"""Where one training update of an image model goes, phase by phase, by subtraction.

Times, round-robin in one process on one device (the image configs' layout), programs
that each add one phase to the one before, for --model on --task (default: the guRNN
on permuted MNIST at --budget 16K, T = 784, batch 128; `--task=memory --T=1000
--sizes=95 --batch_size=128 --model=gurnn_modrelu` profiles the copy task):

- `chain forward`: h ← h W + p, every h kept (the least a forward pass with a reverse
  pass after it can do);
- `kernel forward`: the model's recurrence kernel as training runs it (the input
  projection formed in the loop, the activation, every state and what the reverse pass
  needs kept);
- `kernel forward, last state`: the same keeping nothing (as evaluation runs it; a
  task read at every step keeps every state);
- `kernel forward+backward`: its value and W's gradient (the δ chain and W̄);
- `model loss`: the whole model's loss (U(λ) or the expm, input projection, readout);
- `model gradient`: its value and gradient;
- `training update`: the experiments' training chunk (batch gather, gradient, optimizer).

`phase` rows are sums and differences of these rows' best times, the share of the
update each phase takes; all but the last add up to the update (docs/benchmarks.md,
"Where a guRNN update goes"). --unrolls adds the kernel's forward+backward at other
unrolls (steps per loop iteration).
"""

import functools

from absl import app
from absl import flags
import jax
import jax.numpy as jnp

from benchmarks import ceiling
from benchmarks import rnn
from benchmarks import timing
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import experiment
from lie_unitary.nn import recurrence

_MODEL = flags.DEFINE_string("model", "gurnn", "A variant of the rnn subject's --models: "
                             "a guRNN or orthogonal.")
_UNROLLS = flags.DEFINE_list("unrolls", [], "Other unrolls of the kernel's forward+backward.")
flags.FLAGS.set_default("task", "permuted")
flags.FLAGS.set_default("data_parallel", ["1"])


def _kernel(spec, params, length):
  """(fn(W, x, last_only, unroll) -> states, W, x): the model's recurrence kernel with its
  initial bias and input projection, from a zero state, on a random orthogonal W and
  random inputs x (L, B, D)."""
  H = ceiling.state_size(spec)
  cell = params["params"]["cell"]
  if spec.model == "orthogonal":
    fn = functools.partial(recurrence.real_modrelu_recurrence, bias_H=cell["modrelu_bias"])
  elif spec.activation == "modrelu":
    fn = functools.partial(recurrence.modrelu_recurrence, bias_n=cell["modrelu_bias"])
  else:
    fn = functools.partial(recurrence.elementwise_recurrence, activation=spec.activation)
  k1, k2 = jax.random.split(jax.random.key(0))
  w = jnp.linalg.qr(jax.random.normal(k1, (H, H)))[0]
  # The inputs projected a step at a time, as the model runs it (cells.InputProjection).
  v = cell["v"]
  x = jax.random.uniform(k2, (length, spec.batch_size, v["kernel"].shape[0]), jnp.float32)
  kernel = lambda w, x, last, unroll: fn(
      w, jnp.zeros((x.shape[1], H), x.dtype), recurrence.Projection(x, v["kernel"], v.get("bias")),
      unroll=unroll, last_only=last)
  return kernel, w, x


def main(argv):
  del argv
  rnn.use_devices()
  images = rnn._TASK.value in data.IMAGE_TASKS
  T = 784 if images else int(rnn._T.value[0])
  config, model = rnn.config_for(rnn._TASK.value, int((rnn._SIZES.value or [0])[0]),
                                 int((rnn._BATCH.value or [0])[0]), _MODEL.value)
  exp, replicas, spec, sets = rnn.unit_programs(config, model, T, 1)
  if spec.model not in ("gurnn", "gurnn_beta", "free", "orthogonal"):
    raise app.UsageError(f"--model: a guRNN or the orthogonal RNN; got {spec.model!r}.")
  state = exp.init(replicas.ids)
  params = jax.tree.map(lambda a: a[0], state.params)
  net, source, task = experiment.make_model(spec), exp.source, data.get_task(spec.task)
  order = exp.epoch_data(replicas.ids, 0)
  x, y = source.train_batch(jax.random.key(0), 0, None if order is None else order[0], sets)
  key, last = jax.random.key(0), task.readout == "last"
  loss = lambda p: source.metrics(net.apply(p, x, key), y)["loss"]
  kernel, w, x_steps = _kernel(spec, params, task.length(T))
  H, B = w.shape[0], spec.batch_size
  p = jax.random.normal(jax.random.key(2), (task.length(T), B, H), jnp.float32)  # the chain's
  c = jax.random.normal(jax.random.key(3), (B, H) if last else p.shape)
  kernel_loss = lambda w, x, unroll: jnp.sum(c * kernel(w, x, last, unroll))
  grad = lambda unroll: jax.jit(jax.value_and_grad(lambda w, x: kernel_loss(w, x, unroll)))

  variants = {
      "chain forward": timing.blocking(jax.jit(lambda w, p: jax.lax.scan(
          lambda h, pt: (h @ w + pt,) * 2, jnp.zeros_like(p[0]), p)[1]), w, p, items=B),
      "kernel forward": timing.blocking(jax.jit(
          lambda w, x: jax.vjp(lambda w: kernel(w, x, last, spec.unroll), w)), w, x_steps,
          items=B),
      "kernel forward, last state": timing.blocking(jax.jit(
          lambda w, x: kernel(w, x, True, spec.unroll)), w, x_steps, items=B),
      "kernel forward+backward": timing.blocking(grad(spec.unroll), w, x_steps, items=B),
      "model loss": timing.blocking(jax.jit(loss), params, items=B),
      "model gradient": timing.blocking(jax.jit(jax.value_and_grad(loss)), params, items=B),
  }
  for unroll in map(int, _UNROLLS.value):
    variants[f"kernel forward+backward, unroll {unroll}"] = timing.blocking(
        grad(unroll), w, x_steps, items=B)
  variants["training update"], _ = rnn.experiment_variant(config, model, T, 1)
  samples = timing.compare(variants)
  group = {"task": spec.task, "model": spec.model, "H": H, "B": B, "T": spec.T}
  rows = timing.rows(group, samples, reference="training update", per="examples")
  best = {r["variant"]: r["best_ms"] for r in rows}
  flops = ceiling.flops_per_example(1, H, task.length(T), False)
  for row in rows:
    if row["variant"].startswith("chain"):
      row["GFLOP/s"] = flops / row["best_ms"] / 1e6
  # Phases that add up to the training update, and one that does not (in brackets).
  phases = [("forward products, every h kept", ["chain forward"], []),
            ("input projection, activation, the reverse pass's factors kept", ["kernel forward"],
             ["chain forward"]),
            ("reverse pass of the recurrence: δ chain and W̄",
             ["kernel forward+backward"], ["kernel forward"]),
            ("rest of the forward: U(λ) or expm, readout, loss", ["model loss"],
             ["kernel forward, last state"]),
            ("rest of the reverse pass", ["model gradient", "kernel forward, last state"],
             ["model loss", "kernel forward+backward"]),
            ("batch and optimizer", ["training update"], ["model gradient"]),
            ("(keeping the states, within the forward)", ["kernel forward"],
             ["kernel forward, last state"])]
  total = best["training update"]
  for name, plus, minus in phases:
    ms = sum(best[v] for v in plus) - sum(best[v] for v in minus)
    rows.append({**group, "variant": f"phase: {name}", "best_ms": ms,
                 "÷ training update": ms / total})
  timing.report(rows, note="ms per example; phases are differences of best times")
