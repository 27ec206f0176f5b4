"""The hidden-subalgebra family: m operators U_i = expm(L(c_i @ G*)) sharing k generators
G* of u(n), fitted as expm(L(c_i @ M)) by full-batch Adam; each unit in `loop.train_unit`."""

import sys

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
from lie_unitary.experiments.operators.data import example_pairs
from lie_unitary.sequencing import after as _after

NAME = "basis"
# A unit's spec: its cell, approach and seed, these fields, and the pairs' field and dtype.
_SPEC_FIELDS = ("noise_std", "num_val", "num_test", "num_steps", "learning_rates", "restarts")


def make_data(key, spec) -> dict:
  """Replicate `key`'s {"gstar": G* (k, n²), "targets": (m, n, n), "wrapped": how many c_i @ G*
  have an eigenvalue beyond ±π, "train"/"val"/"test": (x, y) pairs (m, P, n)}; operator i's
  from fold_in(·, i): cells that differ in m or pairs alone share their first ones."""
  k_g, k_c, k_train, k_val, k_test = jax.random.split(key, 5)
  real = jnp.dtype(spec.real_dtype)
  gstar = lb.init_basis(k_g, spec.n, spec.k, "random" if spec.subalgebra == "general" else
                        "toroidal", dtype=real)
  coefs = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(k_c, i), (spec.k,), real))(
      jnp.arange(spec.m)) * spec.coef_std
  targets = lb.unitary_from_basis(_after(coefs, gstar), gstar, method="eigh")
  theta = jnp.linalg.eigvalsh(algebra.lambdas_to_hermitian(_after(coefs, targets) @ gstar))
  wrapped = jnp.sum(jnp.max(jnp.abs(theta), axis=-1) > jnp.pi)

  def pairs(key, num):
    return jax.vmap(lambda i, u: example_pairs(jax.random.fold_in(key, i), jnp.arange(num), u,
                                               spec))(jnp.arange(spec.m), targets)

  return dict(gstar=gstar, targets=targets, wrapped=wrapped.astype(real),
              train=pairs(k_train, spec.pairs), val=pairs(k_val, spec.num_val),
              test=pairs(k_test, spec.num_test))


def _squared_error(u, x, y) -> jax.Array:  # mean of ‖U_i x − y‖²: u (m, n, n), x, y (m, P, n)
  err = jnp.einsum("mpj,mij->mpi", x, u) - y
  return jnp.mean(jnp.sum(jnp.real(err) ** 2 + jnp.imag(err) ** 2, axis=-1))


def validate_config(config) -> None:
  """Raises runner.ConfigError naming the first bad field (a cell's k: ≤ n², commuting ≤ n)."""
  F.validate(config, config_lib.FIELDS)
  for i, cell in enumerate(config_lib.cells(config)):
    most = cell["n"] if cell["subalgebra"] == "commuting" else cell["n"] ** 2
    if cell["k"] > most:
      F.fail("k" if i == 0 else "sweeps", config.k if i == 0 else config.sweeps,
             f"k ≤ {most} for a {cell['subalgebra']} subalgebra at n = {cell['n']}")


def units(config) -> list[F.Unit]:
  """A unit per (cell, approach, seed); identity: those and the fields whose rule holds."""
  out = []
  for cell in config_lib.cells(config):
    for approach in config.approaches:
      trained = approach in config_lib.TRAINED
      fits = len(config.learning_rates) * (config.restarts if approach == "learned" else 1)
      out += [F.Unit(
          name=(f"n={cell['n']} k={cell['k']} m={cell['m']} P={cell['pairs']} "
                f"{cell['subalgebra']} {approach}"),
          fields={"family": NAME, "approach": approach, "seed": seed, **cell,
                  **F.identity(config, config_lib.FIELDS, approach)},
          cost=cell["m"] * cell["n"] ** 2 * (fits if trained else 0.01),
          spec=F.resolved(cell, approach=approach, seed=seed, field="complex",
                          real_dtype=config.dtype, **{f: config[f] for f in _SPEC_FIELDS}),
          target_step=config.num_steps if trained else 0) for seed in config.seeds]
  return out


def run_unit(config, unit: F.Unit, ctx: runner.UnitContext) -> None:
  """Computes or resumes one unit in `loop.train_unit` (loop.Interrupted: stopped)."""
  with jax.enable_x64(config.dtype == "float64" or bool(jax.config.jax_enable_x64)):
    replicas = replicas_lib.Replicas(config.num_replicates)
    loop.train_unit(make_task(config, unit, replicas), ctx, replicas)


def make_task(config, unit: F.Unit, replicas) -> loop.Task:
  """A unit's `loop.Task`: a replicate's fits, one per (start, rate), from c = 0; its record
  of the fit of least validation loss (procrustes: the closed form, at step 0)."""
  spec, key = unit.spec, jax.random.key(unit.spec.seed)
  for value in (spec.n, spec.k, config_lib.SUBALGEBRAS.index(spec.subalgebra)):
    key = jax.random.fold_in(key, value)  # replicate r: split(fold_in(key, r)): data, starts
  real, learned = jnp.dtype(spec.real_dtype), spec.approach == "learned"
  trained, starts = spec.approach in config_lib.TRAINED, spec.restarts if learned else 1
  rates = lambda: jnp.tile(jnp.asarray(spec.learning_rates, real), starts)  # (F,)

  def data_of(replicate, key):  # (its data, the starts' key)
    k_data, k_init = jax.random.split(jax.random.fold_in(key, replicate))
    return make_data(k_data, spec), k_init

  def init(replicate, key):
    data, k_init = data_of(replicate, key)
    if spec.approach in ("learned", "random_fixed"):
      k_init = _after(k_init, data["test"])
      bases = jnp.stack([lb.random_basis(jax.random.fold_in(k_init, s), spec.n, spec.k,
                                         dtype=real) for s in range(starts)])
    else:
      bases = {"full": jnp.eye(spec.n * spec.n, dtype=real)}.get(spec.approach, data["gstar"])[None]
    grid_b = jnp.repeat(_after(bases, data["test"]), len(spec.learning_rates), axis=0)
    params = {"coef": jnp.zeros((len(grid_b), spec.m, grid_b.shape[1]), real), "basis": grid_b}
    adam = optax.adam(optax.cosine_decay_schedule(1.0, 1))  # the state holds no rate
    return params, jax.vmap(adam.init)(params)

  def steps(replicate, fits, key, first, num):
    data, _ = data_of(replicate, key)

    def loss(params):  # the basis constant unless learned
      basis = params["basis"] if learned else jax.lax.stop_gradient(params["basis"])
      return _squared_error(lb.unitary_from_basis(params["coef"], basis, method="eigh"),
                            *data["train"])

    def one(params, state, lr):
      opt = optax.adam(optax.cosine_decay_schedule(lr, spec.num_steps))  # decay to 0

      def step(_, carry):
        updates, state = opt.update(jax.grad(loss)(carry[0]), carry[1], carry[0])
        return optax.apply_updates(carry[0], updates), state

      return jax.lax.fori_loop(first, first + num, step, (params, state))

    return jax.vmap(one)(*fits, rates())

  def results(replicate, fits, key) -> dict:
    data, _ = data_of(replicate, key)
    if trained:
      unitaries = jax.vmap(lambda p: lb.unitary_from_basis(p["coef"], p["basis"],
                                                           method="eigh"))(fits[0])
      train, val = (jax.vmap(lambda u: _squared_error(u, *xy))(unitaries)
                    for xy in (data["train"], data["val"]))
    else:  # one fit, in closed form
      unitaries = lb.procrustes_unitary(*data["train"])[None]
      train, val = (_squared_error(unitaries[0], *xy)[None] for xy in (data["train"], data["val"]))
    best = jnp.argmin(jnp.where(jnp.isfinite(val), val, jnp.inf))
    angles = jnp.full(1, jnp.nan, real)  # without a k-dim M
    if spec.approach in ("learned", "random_fixed", "oracle"):
      angles = lb.principal_angles(_after(fits[0]["basis"][best], unitaries), data["gstar"])
    return dict(train_loss=train[best], val_loss=val[best],
                test_loss=_squared_error(unitaries[best], *data["test"]),
                learning_rate=(rates() if trained else jnp.zeros(1, real))[best],
                restart=(best // len(spec.learning_rates)).astype(real),
                angle_max=jnp.max(angles), angle_mean=jnp.mean(angles), wrapped=data["wrapped"],
                val_losses=val if trained else val[:0])

  ids = replicas.ids
  v_steps = replicas.map(steps, (0, 0, None, None, None), donate_argnums=(1,))

  def finish(fits, history):
    out = replicas.gather(replicas.map(results, (0, 0, None))(ids, fits, key))
    floor = 2 * spec.n * float(spec.noise_std) ** 2  # the true operators' loss
    return {workdir_lib.RESULTS: [
        dict(kind="final", step=unit.target_step, replicate=r, noise_floor=floor,
             **{k: (v[r].tolist() if k == "val_losses" else float(v[r]))
                for k, v in out.items()}) for r in range(replicas.num_replicates)]}

  return loop.Task(lambda: (replicas.map(init, (0, None))(ids, key), {}),
                   lambda fits, history, step, num: (v_steps(ids, fits, key, step, num), history),
                   lambda fits, history, step: ([], history, ""), finish, unit.target_step,
                   target_field="num_steps")


write_report = report.write_report  # WORKDIR/report.md and figures; the paths written


def train_and_evaluate(config, workdir: str, **kwargs) -> runner.RunSummary:
  """Runs (or resumes) every unit of a basis config into `workdir` (keyword arguments:
  `runner.train_and_evaluate`'s).

  Raises:
    runner.ConfigError: a bad config field, before anything is written.
  """
  return runner.train_and_evaluate(sys.modules[__name__], config, workdir, **kwargs)
