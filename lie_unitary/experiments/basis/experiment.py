"""The hidden-subalgebra family: config → units → records.

Replicate r of a cell draws k orthonormal hidden generators G* (k, n²), m operators
U_i = expm(L(c_i @ G*)), c_ij ~ N(0, s²), and per operator the pairs of paper §3
(`operators.data.example_pairs` under fold_in(key, i): cells that differ in m or `pairs`
alone share their first operators and pairs). Trained approaches fit U_i = expm(L(c_i @ M))
by full-batch Adam from c = 0, one fit per (start, learning rate); a replicate keeps the fit
of least validation loss. A "final" record per replicate: the losses, the chosen rate and
the principal angles between span(M) and span(G*).
"""

import sys
import time
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from lie_unitary import algebra
from lie_unitary import learned_basis as lb
from lie_unitary.experiments import fields as F
from lie_unitary.experiments import loop
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.basis import config as config_lib
from lie_unitary.experiments.basis import report
from lie_unitary.experiments.fields import Unit
from lie_unitary.experiments.operators.data import example_pairs
from lie_unitary.sequencing import after as _after

NAME = "basis"


class Task(NamedTuple):
  """One cell and the config fields that shape its data (hashable: static under jit)."""
  n: int
  k: int
  m: int
  pairs: int
  subalgebra: str
  coef_std: float = 1.0
  noise_std: float = 0.01
  num_val: int = 32
  num_test: int = 256
  real_dtype: str = "float32"
  field: str = "complex"  # the pairs' (`operators.data.example_pairs`)


class Fit(NamedTuple):
  """How an approach fits (hashable): Adam's rates, the learned basis' starts, the steps."""
  approach: str
  learning_rates: tuple[float, ...] = ()
  restarts: int = 1
  num_steps: int = 0


class Data(NamedTuple):
  """A replicate's problem: G* (k, n²), the targets (m, n, n), how many generators
  c_i @ G* have an eigenvalue of modulus > π (their principal logarithm leaves span(G*)),
  and (x, y) pairs (m, P, n) of the train, val and test sets."""
  gstar: jax.Array
  targets: jax.Array
  wrapped: jax.Array
  train: tuple[jax.Array, jax.Array]
  val: tuple[jax.Array, jax.Array]
  test: tuple[jax.Array, jax.Array]


def make_data(key, task: Task) -> Data:
  """Replicate `key`'s problem (module docstring); LAPACK calls one after another."""
  k_g, k_c, k_train, k_val, k_test = jax.random.split(key, 5)
  real = jnp.dtype(task.real_dtype)
  gstar = lb.init_basis(k_g, task.n, task.k, "random" if task.subalgebra == "general" else
                        "toroidal", dtype=real)
  coefs = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(k_c, i), (task.k,), real))(
      jnp.arange(task.m)) * task.coef_std
  targets = lb.unitary_from_basis(_after(coefs, gstar), gstar, method="eigh")
  theta = jnp.linalg.eigvalsh(algebra.lambdas_to_hermitian(_after(coefs, targets) @ gstar))
  wrapped = jnp.sum(jnp.max(jnp.abs(theta), axis=-1) > jnp.pi)

  def pairs(key, num):  # operator i's pairs under fold_in(key, i)
    return jax.vmap(lambda i, u: example_pairs(jax.random.fold_in(key, i), jnp.arange(num), u,
                                               task))(jnp.arange(task.m), targets)

  return Data(gstar, targets, wrapped.astype(real), pairs(k_train, task.pairs),
              pairs(k_val, task.num_val), pairs(k_test, task.num_test))


def _squared_error(u, x, y) -> jax.Array:
  """Mean over operators and pairs of ‖U_i x − y‖²: u (m, n, n), x and y (m, P, n)."""
  err = jnp.einsum("mpj,mij->mpi", x, u) - y
  return jnp.mean(jnp.sum(jnp.real(err) ** 2 + jnp.imag(err) ** 2, axis=-1))


def _fit_loss(params, xy, train_basis: bool):
  """The loss of {"coef": (m, k), "basis": (k, n²)}; the basis constant unless trained."""
  basis = params["basis"] if train_basis else jax.lax.stop_gradient(params["basis"])
  return _squared_error(lb.unitary_from_basis(params["coef"], basis, method="eigh"), *xy)


def _adam(lr, num_steps: int):  # cosine decay from lr to 0
  return optax.adam(optax.cosine_decay_schedule(lr, num_steps))


class Fitter(NamedTuple):
  """A trained approach's fits of one replicate as jittable pieces (`make_fitter`). Fits:
  ({"coef": (F, m, k), "basis": (F, k, n²)}, Adam states), one per (start, rate),
  start-major: F = starts · rates."""
  init: Callable  # (replicate, key) -> the fits at step 0
  steps: Callable  # (replicate, fits, key, first, num) -> after Adam steps first..first+num-1
  results: Callable  # (replicate, fits, key) -> the replicate's results


def make_fitter(task: Task, fit: Fit) -> Fitter:
  """A replicate's fits (replicate r: `make_data` of the first half of split(fold_in(key,
  r)), the second its starts' key): at step 0, c = 0 and the basis M (learned: start s
  from fold_in(init key, s), the first random_fixed's too; full: the standard basis;
  oracle: G*); Adam on the training pairs moves c, and for `learned` M too. Results: from
  the fit of least validation loss, or for procrustes in closed form (fits unused):
  {"test_loss", "train_loss", "val_loss", "learning_rate", "restart", "angle_max",
  "angle_mean" (NaN without a k-dim basis), "wrapped" (`Data`)}, scalars of the real
  dtype, and "val_losses" (F,), empty for procrustes."""
  real = jnp.dtype(task.real_dtype)
  starts = fit.restarts if fit.approach == "learned" else 1
  rates = lambda: jnp.tile(jnp.asarray(fit.learning_rates, real), starts)  # (F,)

  def data_of(replicate, key):  # (Data, the starts' key)
    k_data, k_init = jax.random.split(jax.random.fold_in(key, replicate))
    return make_data(k_data, task), k_init

  def init(replicate, key):
    data, k_init = data_of(replicate, key)
    if fit.approach in ("learned", "random_fixed"):
      k_init = _after(k_init, data.test)
      bases = jnp.stack([lb.random_basis(jax.random.fold_in(k_init, s), task.n, task.k,
                                         dtype=real) for s in range(starts)])
    else:
      bases = ({"full": jnp.eye(task.n * task.n, dtype=real)}.get(fit.approach,
                                                                  data.gstar))[None]
    grid_b = jnp.repeat(_after(bases, data.test), len(fit.learning_rates), axis=0)
    params = {"coef": jnp.zeros((grid_b.shape[0], task.m, grid_b.shape[1]), real),
              "basis": grid_b}
    return params, jax.vmap(lambda p: _adam(1.0, 1).init(p))(params)  # no rate in the state

  def steps(replicate, fits, key, first, num):
    data, _ = data_of(replicate, key)

    def one(params, state, lr):
      opt = _adam(lr, fit.num_steps)

      def step(_, carry):
        p, s = carry
        grads = jax.grad(_fit_loss)(p, data.train, fit.approach == "learned")
        updates, s = opt.update(grads, s, p)
        return optax.apply_updates(p, updates), s

      return jax.lax.fori_loop(first, first + num, step, (params, state))

    return jax.vmap(one)(*fits, rates())

  def results(replicate, fits, key) -> dict:
    data, _ = data_of(replicate, key)
    nan = jnp.asarray(jnp.nan, real)
    if fit.approach == "procrustes":
      u = lb.procrustes_unitary(*data.train)
      losses = [_squared_error(u, *xy) for xy in (data.train, data.val, data.test)]
      return dict(train_loss=losses[0], val_loss=losses[1], test_loss=losses[2],
                  learning_rate=jnp.zeros((), real), restart=jnp.zeros((), real),
                  angle_max=nan, angle_mean=nan, wrapped=data.wrapped,
                  val_losses=jnp.zeros((0,), real))
    params = fits[0]
    train_loss = jax.vmap(lambda p: _fit_loss(p, data.train, True))(params)
    unitaries = jax.vmap(lambda p: lb.unitary_from_basis(p["coef"], p["basis"],
                                                         method="eigh"))(params)
    val = jax.vmap(lambda u: _squared_error(u, *data.val))(unitaries)
    best = jnp.argmin(jnp.where(jnp.isfinite(val), val, jnp.inf))
    out = dict(train_loss=train_loss[best], val_loss=val[best],
               test_loss=_squared_error(unitaries[best], *data.test),
               learning_rate=rates()[best],
               restart=(best // len(fit.learning_rates)).astype(real), angle_max=nan,
               angle_mean=nan, wrapped=data.wrapped, val_losses=val)
    if fit.approach != "full":
      angles = lb.principal_angles(_after(params["basis"][best], unitaries), data.gstar)
      out.update(angle_max=jnp.max(angles), angle_mean=jnp.mean(angles))
    return out

  return Fitter(init, steps, results)


def validate_config(config) -> None:
  """Checks every field, then every cell's k (at most n² for general, n for commuting).

  Raises:
    runner.ConfigError: naming the first bad field.
  """
  F.validate(config, config_lib.FIELDS)
  for i, cell in enumerate(config_lib.cells(config)):
    most = cell["n"] if cell["subalgebra"] == "commuting" else cell["n"] ** 2
    if cell["k"] > most:
      F.fail("k" if i == 0 else "sweeps", config.k if i == 0 else config.sweeps,
             f"k ≤ {most} for subalgebra {cell['subalgebra']!r} at n = {cell['n']} (a cell has "
             f"k = {cell['k']})")


def units(config) -> list[Unit]:
  """A unit per (cell, approach, seed): cells in `config.cells` order, approaches in the
  config's order; identity: the cell, approach, seed and the fields whose rule holds."""
  out = []
  for cell in config_lib.cells(config):
    for approach in config.approaches:
      for seed in config.seeds:
        trained = approach in config_lib.TRAINED
        fields = {"family": NAME, "approach": approach, "seed": seed, **cell,
                  **F.identity(config, config_lib.FIELDS, approach)}
        name = (f"n={cell['n']} k={cell['k']} m={cell['m']} P={cell['pairs']} "
                f"{cell['subalgebra']} {approach}")
        fits = len(config.learning_rates) * (config.restarts if approach == "learned" else 1)
        cost = cell["m"] * cell["n"] ** 2 * (fits if trained else 0.01)
        out.append(Unit(name=name, fields=fields, cost=cost,
                        spec=F.resolved(cell, approach=approach, seed=seed),
                        target_step=config.num_steps if trained else 0))
  return out


def run_unit(config, unit: Unit, ctx: runner.UnitContext) -> None:
  """Computes one unit (all replicates): a trained approach through `loop.train_unit`,
  procrustes in one program.

  Raises:
    loop.Interrupted: after a checkpoint, when a stop was requested.
  """
  with jax.enable_x64(config.dtype == "float64" or bool(jax.config.jax_enable_x64)):
    replicas = replicas_lib.Replicas(config.num_replicates)
    task = make_task(config, unit, replicas)
    if unit.spec.approach in config_lib.TRAINED:
      loop.train_unit(task, ctx, replicas)
    else:
      start = time.perf_counter()
      (records,) = task.finish(None, {}).values()
      ctx.write([dict(r, seconds=round(time.perf_counter() - start, 3)) for r in records])


def make_task(config, unit: Unit, replicas) -> loop.Task:
  """A unit's `loop.Task`: every fit of every replicate steps in calls."""
  spec = unit.spec
  cell = {k: spec[k] for k in config_lib.CELL_FIELDS}
  task = Task(**dict(cell, coef_std=float(cell["coef_std"])), noise_std=float(config.noise_std),
              num_val=config.num_val, num_test=config.num_test, real_dtype=config.dtype)
  fit = Fit(spec.approach, tuple(float(v) for v in config.learning_rates), config.restarts,
            config.num_steps)
  key = jax.random.key(spec.seed)
  for value in (cell["n"], cell["k"], config_lib.SUBALGEBRAS.index(cell["subalgebra"])):
    key = jax.random.fold_in(key, value)
  floor = 2 * cell["n"] * float(config.noise_std) ** 2
  fitter = make_fitter(task, fit)
  v_init = replicas.map(fitter.init, (0, None))
  v_steps = replicas.map(fitter.steps, (0, 0, None, None, None), donate_argnums=(1,))
  v_results = replicas.map(fitter.results, (0, 0, None))

  def finish(fits, history):
    out = replicas.gather(v_results(replicas.ids, fits, key))
    return {workdir_lib.RESULTS: [
        dict(kind="final", step=unit.target_step, replicate=r, noise_floor=floor,
             **{k: (v[r].tolist() if k == "val_losses" else float(v[r]))
                for k, v in out.items()}) for r in range(config.num_replicates)]}

  def train(fits, history, step, num):
    return v_steps(replicas.ids, fits, key, step, num), history

  def evaluate(fits, history, step):
    return [], history, ""

  return loop.Task(lambda: (v_init(replicas.ids, key), {}), train, evaluate, finish,
                   unit.target_step, target_field="num_steps")


write_report = report.write_report  # WORKDIR/report.md and figures; the paths written


def train_and_evaluate(config, workdir: str, **kwargs) -> runner.RunSummary:
  """Runs (or resumes) every unit of a basis config into `workdir` (keyword arguments:
  `runner.train_and_evaluate`'s).

  Raises:
    runner.ConfigError: a bad config field, before anything is written.
  """
  return runner.train_and_evaluate(sys.modules[__name__], config, workdir, **kwargs)
