"""The operator-learning task's data (paper §3): targets, noisy pairs, losses, baselines.

Everything here is a pure function of PRNG keys, written for ONE replicate and
batched by the caller with `jax.vmap` (see `lie_unitary.experiments.replicas`):

- Data are never stored. Training pair i of a replicate is regenerated from
  ``fold_in(train_key, i)``: x ∈ Cⁿ with real and imaginary parts ~ N(0, 1) and
  y = Ux + ε with real and imaginary parts of ε ~ N(0, noise_std²) (real x and ε for
  real orthogonal targets).
- `make_target` draws replicate r's target from generator
  ``generators[r % len(generators)]``.
- `make_baselines(task)` returns ``baselines_fn(key, replicate) -> dict`` with the
  ``true`` (the target), ``rand`` (a fresh matrix from the same generator) and
  ``lstsq`` (closed-form least squares on the training pairs, unconstrained) losses.

The loss is the mean over pairs of the squared l2 norm ‖Ûx − y‖² (complex: the sum
of squared real and imaginary parts). Matrices act on column vectors; a batch of
row vectors x_BxN is mapped to x_BxN @ Uᵀ.

Shape letters: B batch, N = n, P pairs.
"""

from __future__ import annotations

from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lie_unitary import algebra
from lie_unitary import expm
from lie_unitary import generators
from lie_unitary.experiments.operators import config as config_lib
from lie_unitary.sequencing import after as _after

__all__ = ["ReplicateKeys", "TaskSpec", "change_of_basis_matrix", "dataset_loss", "dtypes",
           "example_pairs", "least_squares_fit", "make_baselines", "make_target",
           "noise_floor", "replicate_keys", "squared_error_loss"]

_EVAL_CHUNK = 10_000  # pairs per chunk when evaluating a whole data set
_DEFAULTS = config_lib.defaults()


class TaskSpec(NamedTuple):
  """Static description of the task (hashable; closed over by jitted code). Defaults:
  the family's config defaults (`config.FIELDS`).

  Attributes:
    n: matrix size.
    field: "complex" (U(n) targets, complex x) or "real" (SO(n) targets, real x).
    generators: target generators cycled over replicates.
    num_train: training pairs per replicate (10⁶ in the paper).
    num_val: validation pairs (10⁵).
    num_test: test pairs (10⁵).
    val_subsample: the first this many validation pairs are used for the curve.
    noise_std: standard deviation of each real component of ε (0.01).
    lie_target_std: std of the target λ for the "lie" generator (1; 0.01 in app. B).
    real_dtype: "float32" or "float64"; complex data use the matching complex dtype.
  """
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


class ReplicateKeys(NamedTuple):
  """A replicate's keys, one per purpose; the same for every approach (paired comparisons)."""
  target: jax.Array
  train: jax.Array
  val: jax.Array
  test: jax.Array
  rand: jax.Array
  init: jax.Array
  order: jax.Array


def replicate_keys(key, replicate) -> ReplicateKeys:
  """Named keys of one replicate; the same for every approach (paired comparisons)."""
  return ReplicateKeys(*jax.random.split(jax.random.fold_in(key, replicate),
                                         len(ReplicateKeys._fields)))


def dtypes(task: TaskSpec) -> tuple[jnp.dtype, jnp.dtype]:
  """(real dtype, data dtype) of a task: the data dtype is complex for field='complex'."""
  real = jnp.dtype(task.real_dtype)
  return real, (real if task.field == "real" else algebra.complex_dtype_for(real))


def _real_target(key, n, method, real, lie_std):
  if method == "haar":
    q = jax.random.orthogonal(key, n, dtype=real)
    # Flip the first column where det = -1: exactly Haar on SO(n).
    sign = jnp.sign(jnp.linalg.det(q)).astype(real)
    return q.at[:, 0].multiply(sign)
  if method == "lie":
    return expm.orthogonal_from_lambdas(
        lie_std * jax.random.normal(key, (n * (n - 1) // 2,), real), method="eigh")
  raise ValueError(f"unknown real generator {method!r}; expected one of "
                   f"{config_lib.REAL_GENERATORS}.")


def make_target(key, generator_index, task: TaskSpec) -> jax.Array:
  """The target matrix from generator ``task.generators[generator_index]``.

  Args:
    key: PRNG key.
    generator_index: int32 scalar (may be traced, e.g. ``replicate % G``): all
      generators are built, one after the other, and this one is selected.
    task: the `TaskSpec`.

  Returns:
    (n, n) unitary (complex) or special orthogonal (real, for ``field="real"``).
  """
  real, cplx = dtypes(task)

  def branch(method):
    if task.field == "real":
      return lambda k: _real_target(k, task.n, method, real, task.lie_target_std)
    if method == "lie":
      return lambda k: expm.unitary_from_lambdas(
          task.lie_target_std * jax.random.normal(k, (task.n * task.n,), real), method="eigh")
    return lambda k: generators.random_unitary(k, task.n, method, cplx)

  # Every generator is built (under vmap a switch would do so anyway) one after the
  # other (see `_after`), and the replicate's one is selected.
  outs = []
  for method in task.generators:
    outs.append(branch(method)(_after(key, *outs)))
  if len(outs) == 1:
    return outs[0]
  return jnp.stack(outs)[generator_index]


def example_pairs(key, indices, target, task: TaskSpec) -> tuple[jax.Array, jax.Array]:
  """Regenerates pairs (x_i, y_i = U x_i + ε_i) from their indices.

  Args:
    key: the data set's PRNG key (train, validation or test of one replicate).
    indices: int array (P,), pair indices; pair i depends only on fold_in(key, i).
    target: (n, n) matrix U.
    task: the `TaskSpec`.

  Returns:
    x_PxN, y_PxN: complex (real for ``field="real"``) arrays of the data dtype.
  """
  real, cplx = dtypes(task)
  parts = 4 if task.field == "complex" else 2
  z = jax.vmap(lambda i: jax.random.normal(jax.random.fold_in(key, i), (parts, task.n), real))(
      indices)
  if task.field == "complex":
    x_PxN = jax.lax.complex(z[:, 0], z[:, 1])
    eps_PxN = jax.lax.complex(z[:, 2], z[:, 3]) * jnp.asarray(task.noise_std, real)
  else:
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
  real, _ = dtypes(task)
  total = _scan_over_pairs(
      key, num, target, task,
      lambda s, x, y: s + squared_error_loss(matrix, x, y) * x.shape[0],
      jnp.zeros((), real))
  return total / num


def least_squares_fit(key, target, task: TaskSpec) -> jax.Array:
  """The unconstrained A minimising Σ_i ‖A x_i − y_i‖² over the training pairs.

  Aᵀ = (XᴴX)⁻¹ XᴴY with X, Y the stacked rows, accumulated chunk by chunk.

  Returns:
    (n, n) matrix of the data dtype.
  """
  _, cplx = dtypes(task)
  zeros = jnp.zeros((task.n, task.n), cplx)

  def acc(carry, x, y):
    xx, xy = carry
    xh = jnp.conj(x).T
    return xx + xh @ x, xy + xh @ y

  xx, xy = _scan_over_pairs(key, task.num_train, target, task, acc, (zeros, zeros))
  return jnp.linalg.solve(xx, xy).T


def make_baselines(task: TaskSpec) -> Callable[[jax.Array, jax.Array], dict]:
  """Builds the baselines of one replicate as a pure function.

  Returns:
    ``baselines_fn(key, replicate)`` (same keys and targets as `make_train`) giving
    ``{name: {"test_loss": scalar, "final_val_loss": scalar}}`` for name in
    `config_lib.BASELINES`: ``true`` (the target), ``rand`` (an independent draw from the same
    generator) and ``lstsq`` (the least-squares fit on the training pairs).
  """

  def baselines_fn(key, replicate):
    keys = replicate_keys(key, replicate)
    g = replicate % len(task.generators)
    target = make_target(keys.target, g, task)
    rand = make_target(_after(keys.rand, target), g, task)
    lstsq = least_squares_fit(_after(keys.train, rand), target, task)
    matrices = dict(true=target, rand=rand, lstsq=lstsq)
    return {
        name: dict(test_loss=dataset_loss(m, keys.test, task.num_test, target, task),
                   final_val_loss=dataset_loss(m, keys.val, task.num_val, target, task))
        for name, m in matrices.items()
    }

  return baselines_fn


def change_of_basis_matrix(key, n: int, scale: float, dtype=jnp.float32) -> jax.Array:
  """Appendix B's M: identity for scale 0, else entries ~ U(−scale, scale), (n², n²)."""
  if scale == 0:
    return jnp.eye(n * n, dtype=dtype)
  return jax.random.uniform(key, (n * n, n * n), dtype, -scale, scale)


def noise_floor(task: TaskSpec) -> float:
  """E‖ε‖² = (2n for complex, n for real) · noise_std²: the loss of the true U."""
  return (2 if task.field == "complex" else 1) * task.n * task.noise_std ** 2
