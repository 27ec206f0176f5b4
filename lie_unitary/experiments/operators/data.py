"""The operator-learning task's data (paper §3): targets, noisy pairs, losses, baselines,
as pure functions of PRNG keys for one replicate (the caller vmaps)."""

import collections
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lie_unitary import algebra
from lie_unitary import expm
from lie_unitary import generators
from lie_unitary import parametrizations
from lie_unitary.experiments.operators import config as config_lib
from lie_unitary.sequencing import after as _after

_EVAL_CHUNK = 10_000  # pairs per chunk when evaluating a whole data set
_DEFAULTS = config_lib.defaults()


class TaskSpec(NamedTuple):
  """The task (hashable, static under jit): size `n`, the real dtype, the config fields."""
  n: int
  field: str = _DEFAULTS.field
  generators: tuple[str, ...] = tuple(_DEFAULTS.generators)
  num_train: int = _DEFAULTS.num_train
  num_val: int = _DEFAULTS.num_val
  num_test: int = _DEFAULTS.num_test
  val_subsample: int = _DEFAULTS.val_subsample
  noise_std: float = _DEFAULTS.noise_std
  lie_target_std: float = _DEFAULTS.lie_target_std
  real_dtype: str = config_lib.real_dtype(_DEFAULTS.dtype)


# A replicate's keys, one per purpose; the same for every approach (paired comparisons).
ReplicateKeys = collections.namedtuple("ReplicateKeys", "target train val test rand init order")


def replicate_keys(key, replicate) -> ReplicateKeys:
  """The named keys of replicate `replicate` under `key`."""
  return ReplicateKeys(*jax.random.split(jax.random.fold_in(key, replicate),
                                         len(ReplicateKeys._fields)))


def dtypes(task: TaskSpec) -> tuple[jnp.dtype, jnp.dtype]:
  """(real dtype, data dtype) of a task: the data dtype is complex for field='complex'."""
  real = jnp.dtype(task.real_dtype)
  return real, (real if task.field == "real" else algebra.complex_dtype_for(real))


def make_target(key, generator_index, task: TaskSpec) -> jax.Array:
  """The (n, n) unitary (SO(n): field="real") target of ``task.generators[i]`` (i may be
  traced: every generator is drawn, one selected); ValueError: an unknown generator."""
  real, cplx = dtypes(task)
  n, std = task.n, task.lie_target_std

  def draw(method, k):
    if method == "lie":  # λ ~ N(0, std²) of so(n) or u(n)
      size, lambdas_to = ((n * (n - 1) // 2, expm.orthogonal_from_lambdas) if task.field == "real"
                          else (n * n, expm.unitary_from_lambdas))
      return lambdas_to(std * jax.random.normal(k, (size,), real), method="eigh")
    if task.field == "complex":
      return generators.random_unitary(k, n, method, cplx)
    if method == "haar":  # the first column flipped where det = -1: exactly Haar on SO(n)
      q = jax.random.orthogonal(k, n, dtype=real)
      return q.at[:, 0].multiply(jnp.sign(jnp.linalg.det(q)).astype(real))
    raise ValueError(f"unknown real generator {method!r}; expected one of "
                     f"{config_lib.REAL_GENERATORS}.")

  outs = []  # drawn one after the other (`_after`); a switch under vmap draws all too
  for method in task.generators:
    outs.append(draw(method, _after(key, *outs)))
  return outs[0] if len(outs) == 1 else jnp.stack(outs)[generator_index]


def example_pairs(key, indices, target, task: TaskSpec) -> tuple[jax.Array, jax.Array]:
  """(x_PxN, y_PxN) of the data dtype: pairs i of a data set's `key` at int `indices` (P,)
  from fold_in(key, i), x ~ N(0, 1), y = Ux + ε, ε ~ N(0, noise_std²) per real component."""
  real, cplx = dtypes(task)
  parts = 4 if task.field == "complex" else 2
  z = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(key, i), (parts, task.n), real))(
      indices)
  if task.field == "complex":  # parts (re x, im x, re ε, im ε)
    z = jax.lax.complex(z[:, 0::2], z[:, 1::2])
  x_PxN, eps_PxN = z[:, 0], z[:, 1] * jnp.asarray(task.noise_std, real)
  return x_PxN, (x_PxN @ target.T.astype(cplx) + eps_PxN).astype(cplx)


def squared_error_loss(matrix, x_PxN, y_PxN) -> jax.Array:
  """Mean over pairs of ‖matrix·x − y‖² (squared complex l2 norm); a real scalar."""
  err = x_PxN @ matrix.T - y_PxN
  return jnp.mean(jnp.sum(jnp.real(err) ** 2 + jnp.imag(err) ** 2, axis=-1))


def _scan_over_pairs(key, num, target, task, fn, init):
  """Folds fn(carry, x, y) over the pairs 0..num-1 in chunks (bounded memory)."""
  size = min(num, _EVAL_CHUNK)
  full = num // size

  def body(carry, c):
    x, y = example_pairs(key, c * size + jnp.arange(size), target, task)
    return fn(carry, x, y), None

  carry, _ = jax.lax.scan(body, init, jnp.arange(full))
  if num % size:
    x, y = example_pairs(key, full * size + jnp.arange(num - full * size), target, task)
    carry = fn(carry, x, y)
  return carry


def dataset_loss(matrix, key, num: int, target, task: TaskSpec) -> jax.Array:
  """`squared_error_loss` of `matrix` over pairs 0..num-1 of a data set (chunked)."""
  total = lambda s, x, y: s + squared_error_loss(matrix, x, y) * x.shape[0]
  return _scan_over_pairs(key, num, target, task, total, jnp.zeros((), dtypes(task)[0])) / num


def closed_form_fits(key, target, task: TaskSpec) -> tuple[jax.Array, jax.Array]:
  """(lstsq, procrustes), two (n, n) arrays: argmin Σ_i ‖M x_i − y_i‖² over the training
  pairs of `key`, M free (Mᵀ = (XᴴX)⁻¹ XᴴY) and unitary (orthogonal: the polar factor of
  (XᴴY)ᵀ), from the pairs' moments XᴴX, XᴴY."""
  _, cplx = dtypes(task)
  zeros = jnp.zeros((task.n, task.n), cplx)

  def acc(carry, x, y):
    xx, xy = carry
    xh = jnp.conj(x).T
    return xx + xh @ x, xy + xh @ y

  moments = _scan_over_pairs(key, task.num_train, target, task, acc, (zeros, zeros))
  lstsq = jnp.linalg.solve(*moments).T
  return lstsq, parametrizations.polar_unitary(_after(moments, lstsq)[1].T)


def make_baselines(task: TaskSpec) -> Callable[[jax.Array, jax.Array], dict]:
  """``baselines_fn(key, replicate) -> {name: {test_loss, final_val_loss}}`` of true (the
  target), rand (another draw), lstsq and procrustes, with the trained units' keys."""

  def baselines_fn(key, replicate):
    keys = replicate_keys(key, replicate)
    g = replicate % len(task.generators)
    target = make_target(keys.target, g, task)
    rand = make_target(_after(keys.rand, target), g, task)
    lstsq, procrustes = closed_form_fits(_after(keys.train, rand), target, task)
    loss = lambda m, k, num: dataset_loss(m, k, num, target, task)
    return {name: dict(test_loss=loss(m, keys.test, task.num_test),
                       final_val_loss=loss(m, keys.val, task.num_val))
            for name, m in (("true", target), ("rand", rand), ("lstsq", lstsq),
                            ("procrustes", procrustes))}

  return baselines_fn
