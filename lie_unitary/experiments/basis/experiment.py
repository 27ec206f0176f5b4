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
learning rate in the same program; each replicate keeps the rate of least validation
loss. `run_unit` writes one "final" record per replicate: its test, training and
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
import numpy as np
import optax

from lie_unitary import algebra
from lie_unitary import learned_basis as lb
from lie_unitary.experiments import fields as F
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments.basis import config as config_lib
from lie_unitary.experiments.basis import report
from lie_unitary.experiments.fields import Unit
from lie_unitary.sequencing import after as _after

__all__ = ["NAME", "Task", "fit", "make_data", "run_unit", "solve_replicate",
           "train_and_evaluate", "units", "validate_config", "write_report"]

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


def fit(basis, train_basis: bool, m: int, xy, lr, num_steps: int):
  """Full-batch Adam (cosine decay from `lr` to 0) on the coefficients c (m, k) from 0,
  and on the basis M (k, n²) from `basis` when `train_basis`.

  Returns:
    ({"coef": (m, k), "basis": (k, n²)}, the final training loss).
  """
  params = {"coef": jnp.zeros((m, basis.shape[0]), basis.dtype), "basis": basis}
  opt = optax.adam(optax.cosine_decay_schedule(lr, num_steps))
  frozen = lambda p: p if train_basis else dict(p, basis=jax.lax.stop_gradient(p["basis"]))

  def loss(p):
    p = frozen(p)
    return squared_error(lb.unitary_from_basis(p["coef"], p["basis"], method="eigh"), *xy)

  def step(carry, _):
    p, state = carry
    grads = jax.grad(loss)(p)
    updates, state = opt.update(grads, state, p)
    return (optax.apply_updates(p, updates), state), None

  (params, _), _ = jax.lax.scan(step, (params, opt.init(params)), None, length=num_steps)
  return params, loss(params)


def solve_replicate(key, replicate, approach: str, task: Task, learning_rates=(),
                    num_steps: int = 0, restarts: int = 1) -> dict:
  """One replicate of one approach: its losses, chosen rate and principal angles.

  Args:
    key: the cell's key (replicate r uses fold_in(key, r)).
    replicate: int (may be traced).
    approach: one of `config.APPROACHES`.
    task: the cell.
    learning_rates: Adam's rates tried (trained approaches).
    num_steps: optimizer steps (trained approaches).
    restarts: random initial bases of `learned` (start s from fold_in(init key, s); the
      first is random_fixed's basis).

  Returns:
    {"test_loss", "train_loss", "val_loss", "learning_rate", "restart", "angle_max",
    "angle_mean" (NaN without a k-dim basis): scalars of the real dtype, of the (start,
    rate) of least validation loss; "wrapped" (`Data`); "val_losses": (starts · rates,),
    empty for procrustes}.
  """
  k_data, k_init = jax.random.split(jax.random.fold_in(key, replicate))
  data = make_data(k_data, task)
  real = jnp.dtype(task.real_dtype)
  nan = jnp.asarray(jnp.nan, real)
  if approach == "procrustes":
    u = lb.procrustes_unitary(*data.train)
    losses = [squared_error(u, *xy) for xy in (data.train, data.val, data.test)]
    return dict(train_loss=losses[0], val_loss=losses[1], test_loss=losses[2],
                learning_rate=jnp.zeros((), real), restart=jnp.zeros((), real),
                angle_max=nan, angle_mean=nan, wrapped=data.wrapped,
                val_losses=jnp.zeros((0,), real))
  starts = restarts if approach == "learned" else 1
  if approach in ("learned", "random_fixed"):  # random_fixed: learned's first start
    k_init = _after(k_init, data.test)
    bases = jnp.stack([lb.random_basis(jax.random.fold_in(k_init, s), task.n, task.k,
                                       dtype=real) for s in range(starts)])
  else:
    bases = ({"full": jnp.eye(task.n * task.n, dtype=real)}.get(approach, data.gstar))[None]
  lrs = jnp.asarray(learning_rates, real)
  grid_b = jnp.repeat(_after(bases, data.test), len(learning_rates), axis=0)
  grid_lr = jnp.tile(lrs, starts)                                 # start-major (starts · rates)
  params, train_loss = jax.vmap(lambda b, lr: fit(b, approach == "learned", task.m,
                                                  data.train, lr, num_steps))(grid_b, grid_lr)
  unitaries = jax.vmap(lambda p: lb.unitary_from_basis(p["coef"], p["basis"], method="eigh"))(
      params)
  val = jax.vmap(lambda u: squared_error(u, *data.val))(unitaries)
  best = jnp.argmin(jnp.where(jnp.isfinite(val), val, jnp.inf))
  out = dict(train_loss=train_loss[best], val_loss=val[best],
             test_loss=squared_error(unitaries[best], *data.test), learning_rate=grid_lr[best],
             restart=(best // len(learning_rates)).astype(real), angle_max=nan,
             angle_mean=nan, wrapped=data.wrapped, val_losses=val)
  if approach != "full":
    angles = lb.principal_angles(_after(params["basis"][best], unitaries), data.gstar)
    out.update(angle_max=jnp.max(angles), angle_mean=jnp.mean(angles))
  return out


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
  """Computes one unit (all replicates, one program) and writes its records."""
  spec = unit.spec
  cell, approach, seed = {k: spec[k] for k in config_lib.CELL_FIELDS}, spec.approach, spec.seed
  with jax.enable_x64(config.dtype == "float64" or bool(jax.config.jax_enable_x64)):
    start = time.perf_counter()
    task = Task(**dict(cell, coef_std=float(cell["coef_std"])),
                noise_std=float(config.noise_std),
                num_val=config.num_val, num_test=config.num_test, real_dtype=config.dtype)
    key = jax.random.key(seed)
    for value in (cell["n"], cell["k"], config_lib.SUBALGEBRAS.index(cell["subalgebra"])):
      key = jax.random.fold_in(key, value)
    replicas = replicas_lib.Replicas(config.num_replicates)
    lrs = tuple(float(v) for v in config.learning_rates)
    program = replicas.map(lambda r, k: solve_replicate(
        k, r, approach, task, lrs, config.num_steps, config.restarts), (0, None))
    out = replicas.gather(program(replicas.ids, key))
  seconds = round(time.perf_counter() - start, 3)
  floor = 2 * cell["n"] * float(config.noise_std) ** 2
  ctx.printer(f"{unit.label}: test loss median {np.median(out['test_loss']):.4g} (noise "
              f"floor {floor:.3g})")
  ctx.write([dict(kind="final", step=unit.target_step, replicate=r, noise_floor=floor,
                  seconds=seconds, **{k: (v[r].tolist() if k == "val_losses" else
                                          float(v[r])) for k, v in out.items()})
             for r in range(config.num_replicates)])


write_report = report.write_report  # WORKDIR/report.md and figures; the paths written


def train_and_evaluate(config, workdir: str, **kwargs) -> runner.RunSummary:
  """Runs (or resumes) every unit of a basis config into `workdir` (keyword arguments:
  `runner.train_and_evaluate`'s).

  Raises:
    runner.ConfigError: a bad config field, before anything is written.
  """
  return runner.train_and_evaluate(sys.modules[__name__], config, workdir, **kwargs)
