"""The hidden-subalgebra family of the runner: config → units → records.

Replicate r of a cell draws k hidden generators G* (rows of a (k, n²) coefficient matrix,
orthonormal: `learned_basis.init_basis`, 'random' for subalgebra general, 'toroidal' for
commuting), m operators U_i = expm(L(c_i @ G*)) with c_ij ~ N(0, s²), and for each
operator `pairs` training, `num_val` validation and `num_test` test pairs x → y = U_i x + ε
as in paper §3 (x complex, N(0, 1) per real component; ε N(0, σ²) per real component).
Pair p of operator i comes from fold_in(fold_in(key, i), p): cells that differ in m or
`pairs` alone share their first operators and pairs, and every approach sees the same.

A unit is one (cell, approach), its replicates one vmapped program (`replicas`). Trained
approaches fit U_i = expm(L(c_i @ M)) by full-batch Adam from c = 0 (U = I), one run per
learning rate in the same program, in calls of the shared loop (`loop.train_unit`:
checkpoints, progress, stops); each replicate keeps the rate of least validation loss.
`run_unit` writes one "final" record per replicate: its test, training and
validation losses (means over operators of the mean over pairs of ‖Û_i x − y‖²), the
chosen rate, and for approaches with a k-dim basis the principal angles between span(M)
and span(G*).
"""

from __future__ import annotations

import sys
import time
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
from lie_unitary.sequencing import after as _after

__all__ = ["NAME", "Task", "fit_results", "fit_steps", "init_fits", "make_data", "make_task",
           "run_unit", "solve_replicate", "train_and_evaluate", "units", "validate_config",
           "write_report"]

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


class Data(NamedTuple):
  """A replicate's problem: G* (k, n²), the targets (m, n, n), how many targets' generators
  c_i @ G* have an eigenvalue of modulus > π (their principal logarithm is another
  element, outside span(G*) in general), and pairs as rows (m, P, n), y = x @ U_iᵀ + ε,
  for the train, val and test sets."""
  gstar: jax.Array
  targets: jax.Array
  wrapped: jax.Array
  train: tuple[jax.Array, jax.Array]
  val: tuple[jax.Array, jax.Array]
  test: tuple[jax.Array, jax.Array]


def _pairs(key, num, targets, task: Task):
  """Pairs (x, y), each (m, num, n) complex: pair p of operator i from fold_in(key, i, p)."""
  real = jnp.dtype(task.real_dtype)

  def one(i, p):
    z = jax.random.normal(jax.random.fold_in(jax.random.fold_in(key, i), p), (4, task.n), real)
    return jax.lax.complex(z[0], z[1]), jax.lax.complex(z[2], z[3]) * task.noise_std

  ops, idx = jnp.arange(task.m), jnp.arange(num)
  x, eps = jax.vmap(lambda i: jax.vmap(lambda p: one(i, p))(idx))(ops)
  return x, jnp.einsum("mpj,mij->mpi", x, targets) + eps


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
  sets = [_pairs(k, num, targets, task) for k, num in
          ((k_train, task.pairs), (k_val, task.num_val), (k_test, task.num_test))]
  return Data(gstar, targets, wrapped.astype(real), *sets)


def squared_error(u, x, y) -> jax.Array:
  """Mean over operators and pairs of ‖U_i x − y‖²: u (m, n, n), x and y (m, P, n)."""
  err = jnp.einsum("mpj,mij->mpi", x, u) - y
  return jnp.mean(jnp.sum(jnp.real(err) ** 2 + jnp.imag(err) ** 2, axis=-1))


def _adam(lr, num_steps: int):
  """Adam with a cosine decay from `lr` to 0 over `num_steps`."""
  return optax.adam(optax.cosine_decay_schedule(lr, num_steps))


def _fit_loss(params, xy, train_basis: bool):
  """The training loss of a fit {"coef": (m, k), "basis": (k, n²)}; the basis a constant
  unless `train_basis`."""
  basis = params["basis"] if train_basis else jax.lax.stop_gradient(params["basis"])
  return squared_error(lb.unitary_from_basis(params["coef"], basis, method="eigh"), *xy)


def _grid(approach: str, learning_rates, restarts: int, real) -> jax.Array:
  """The rate of each fit: (starts · rates,), start-major."""
  return jnp.tile(jnp.asarray(learning_rates, real), restarts if approach == "learned" else 1)


def init_fits(key, replicate, approach: str, task: Task, learning_rates=(),
              restarts: int = 1):
  """A trained approach's fits at step 0, one per (start, rate), start-major: c = 0 and
  the initial basis M (learned: start s from fold_in(init key, s), the first also
  random_fixed's; full: the standard basis; oracle: G*), and Adam's state.

  Returns:
    ({"coef": (F, m, k), "basis": (F, k, n²)}, Adam states), F = starts · rates.
  """
  k_data, k_init = jax.random.split(jax.random.fold_in(key, replicate))
  data = make_data(k_data, task)
  real = jnp.dtype(task.real_dtype)
  if approach in ("learned", "random_fixed"):
    k_init = _after(k_init, data.test)
    bases = jnp.stack([lb.random_basis(jax.random.fold_in(k_init, s), task.n, task.k,
                                       dtype=real)
                       for s in range(restarts if approach == "learned" else 1)])
  else:
    bases = ({"full": jnp.eye(task.n * task.n, dtype=real)}.get(approach, data.gstar))[None]
  grid_b = jnp.repeat(_after(bases, data.test), len(learning_rates), axis=0)
  params = {"coef": jnp.zeros((grid_b.shape[0], task.m, grid_b.shape[1]), real),
            "basis": grid_b}
  return params, jax.vmap(lambda p: _adam(1.0, 1).init(p))(params)  # no rate in the state


def fit_steps(fits, key, replicate, approach: str, task: Task, learning_rates, restarts: int,
              num_steps: int, first, num):
  """Full-batch Adam steps first..first+num-1 (of `num_steps`) of every fit on the
  replicate's training pairs: the coefficients, and for `learned` the basis too."""
  data = make_data(jax.random.split(jax.random.fold_in(key, replicate))[0], task)
  lrs = _grid(approach, learning_rates, restarts, jnp.dtype(task.real_dtype))

  def one(params, state, lr):
    opt = _adam(lr, num_steps)

    def step(_, carry):
      p, s = carry
      grads = jax.grad(_fit_loss)(p, data.train, approach == "learned")
      updates, s = opt.update(grads, s, p)
      return optax.apply_updates(p, updates), s

    return jax.lax.fori_loop(first, first + num, step, (params, state))

  return jax.vmap(one)(*fits, lrs)


def fit_results(fits, key, replicate, approach: str, task: Task, learning_rates=(),
                restarts: int = 1) -> dict:
  """One replicate's results: for trained approaches from its `fits` (those of the
  (start, rate) of least validation loss), for procrustes in closed form (`fits` unused).

  Returns:
    {"test_loss", "train_loss", "val_loss", "learning_rate", "restart", "angle_max",
    "angle_mean" (NaN without a k-dim basis): scalars of the real dtype; "wrapped"
    (`Data`); "val_losses": (starts · rates,), empty for procrustes}.
  """
  data = make_data(jax.random.split(jax.random.fold_in(key, replicate))[0], task)
  real = jnp.dtype(task.real_dtype)
  nan = jnp.asarray(jnp.nan, real)
  if approach == "procrustes":
    u = lb.procrustes_unitary(*data.train)
    losses = [squared_error(u, *xy) for xy in (data.train, data.val, data.test)]
    return dict(train_loss=losses[0], val_loss=losses[1], test_loss=losses[2],
                learning_rate=jnp.zeros((), real), restart=jnp.zeros((), real),
                angle_max=nan, angle_mean=nan, wrapped=data.wrapped,
                val_losses=jnp.zeros((0,), real))
  params = fits[0]
  train_loss = jax.vmap(lambda p: _fit_loss(p, data.train, True))(params)
  unitaries = jax.vmap(lambda p: lb.unitary_from_basis(p["coef"], p["basis"], method="eigh"))(
      params)
  val = jax.vmap(lambda u: squared_error(u, *data.val))(unitaries)
  best = jnp.argmin(jnp.where(jnp.isfinite(val), val, jnp.inf))
  out = dict(train_loss=train_loss[best], val_loss=val[best],
             test_loss=squared_error(unitaries[best], *data.test),
             learning_rate=_grid(approach, learning_rates, restarts, real)[best],
             restart=(best // len(learning_rates)).astype(real), angle_max=nan,
             angle_mean=nan, wrapped=data.wrapped, val_losses=val)
  if approach != "full":
    angles = lb.principal_angles(_after(params["basis"][best], unitaries), data.gstar)
    out.update(angle_max=jnp.max(angles), angle_mean=jnp.mean(angles))
  return out


def solve_replicate(key, replicate, approach: str, task: Task, learning_rates=(),
                    num_steps: int = 0, restarts: int = 1) -> dict:
  """One replicate of one approach in one go: `init_fits`, `num_steps` of `fit_steps`,
  `fit_results` (whose dict it returns).

  Args:
    key: the cell's key (replicate r uses fold_in(key, r)).
    replicate: int (may be traced).
    approach: one of `config.APPROACHES`.
    task: the cell.
    learning_rates: Adam's rates tried (trained approaches).
    num_steps: optimizer steps (trained approaches).
    restarts: random initial bases of `learned`.
  """
  fits = None
  if approach != "procrustes":
    fits = init_fits(key, replicate, approach, task, learning_rates, restarts)
    fits = fit_steps(fits, key, replicate, approach, task, learning_rates, restarts,
                     num_steps, 0, num_steps)
  return fit_results(fits, key, replicate, approach, task, learning_rates, restarts)


def validate_config(config) -> None:
  """Checks every field, then every cell's k against its n and subalgebra.

  Raises:
    runner.ConfigError: naming the first bad field (k or sweeps for a k that does not
      fit: at most n² for general, n for commuting).
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
  """Computes one unit (all replicates): a trained approach through `loop.train_unit`
  (checkpoints, progress, stops), procrustes (closed form) in one program.

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
  """A unit's `loop.Task`: every fit of every replicate steps in calls; one "final"
  record per replicate at the end (module docstring)."""
  spec = unit.spec
  cell, approach = {k: spec[k] for k in config_lib.CELL_FIELDS}, spec.approach
  task = Task(**dict(cell, coef_std=float(cell["coef_std"])), noise_std=float(config.noise_std),
              num_val=config.num_val, num_test=config.num_test, real_dtype=config.dtype)
  key = jax.random.key(spec.seed)
  for value in (cell["n"], cell["k"], config_lib.SUBALGEBRAS.index(cell["subalgebra"])):
    key = jax.random.fold_in(key, value)
  args = (approach, task, tuple(float(v) for v in config.learning_rates), config.restarts)
  floor = 2 * cell["n"] * float(config.noise_std) ** 2
  v_init = replicas.map(lambda r, k: init_fits(k, r, *args), (0, None))
  v_steps = replicas.map(lambda r, f, k, first, num: fit_steps(
      f, k, r, *args, config.num_steps, first, num), (0, 0, None, None, None),
      donate_argnums=(1,))
  v_results = replicas.map(lambda r, f, k: fit_results(f, k, r, *args), (0, 0, None))
  v_closed = replicas.map(lambda r, k: fit_results(None, k, r, *args), (0, None))

  def train(fits, history, step, num):
    return v_steps(replicas.ids, fits, key, step, num), history

  def evaluate(fits, history, step):
    return [], history, ""

  def finish(fits, history):
    out = replicas.gather(v_closed(replicas.ids, key) if fits is None
                          else v_results(replicas.ids, fits, key))
    return {workdir_lib.RESULTS: [
        dict(kind="final", step=unit.target_step, replicate=r, noise_floor=floor,
             **{k: (v[r].tolist() if k == "val_losses" else float(v[r]))
                for k, v in out.items()}) for r in range(config.num_replicates)]}

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
