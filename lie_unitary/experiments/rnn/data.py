"""The RNN tasks (`get_task`): the adding and memory problems (paper §4), drawn from a key
inside jit, and sequential images, a pixel a step; a unit's programs read a task's data
through a `Source`. B batch, T sequence length, L steps, D input features, K classes."""

import functools
import math
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import optax

from lie_unitary.experiments.rnn.config import IMAGE_TASKS as IMAGE_TASKS
from lie_unitary.experiments.rnn.images import ImageSets as ImageSets
from lie_unitary.experiments.rnn.images import load_image_sets as load_image_sets

# The memory problem: 10 symbols from 1..8 to remember; inputs one-hot over blank (0), the
# symbols and the delimiter (9); outputs over blank and the symbols.
MEMORY_SYMBOLS, MEMORY_ALPHABET = 10, 8


def _check_batch_args(batch_size, T, min_T):
  for name, value, least in (("batch_size", batch_size, 1), ("T", T, min_T)):
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
      raise ValueError(f"{name} must be an integer ≥ {least}; got {value!r}.")


def adding_batch(key, batch_size: int, T: int) -> tuple[jax.Array, jax.Array]:
  """The adding problem: x (B, T, 2) float32, values ~ U(0, 1) and two markers (one in each
  half); y (B,) float32, the marked values' sum. Raises ValueError: batch_size < 1, T < 2."""
  _check_batch_args(batch_size, T, 2)
  k_val, k_first, k_second = jax.random.split(key, 3)
  values_BxT = jax.random.uniform(k_val, (batch_size, T), jnp.float32)
  first_B = jax.random.randint(k_first, (batch_size,), 0, T // 2)
  second_B = jax.random.randint(k_second, (batch_size,), T // 2, T)
  markers_BxT = jax.nn.one_hot(jnp.stack([first_B, second_B], 1), T, dtype=jnp.float32).sum(1)
  y_B = jnp.sum(values_BxT * markers_BxT, axis=1)
  return jnp.stack([values_BxT, markers_BxT], axis=-1), y_B


def adding_loss(pred_B, y_B) -> jax.Array:
  """Mean squared error over the batch: pred_B (B,) float, y_B (B,) float -> scalar."""
  return jnp.mean((pred_B - y_B) ** 2)


def memory_batch(key, batch_size: int, T: int) -> tuple[jax.Array, jax.Array]:
  """The memory (copy) problem: x (B, T + 20, 10) float32 one-hot, 10 symbols in 1..8, T - 1
  blanks 0, the delimiter 9, 10 blanks; labels (B, T + 20) int32, 0 but the symbols last."""
  _check_batch_args(batch_size, T, 1)
  S = MEMORY_SYMBOLS
  symbols_BxS = jax.random.randint(key, (batch_size, S), 1, MEMORY_ALPHABET + 1, jnp.int32)
  fill = lambda n, value=0: jnp.full((batch_size, n), value, jnp.int32)
  inputs_BxL = jnp.concatenate([symbols_BxS, fill(T - 1), fill(1, 9), fill(S)], axis=1)
  labels_BxL = jnp.concatenate([fill(T + S), symbols_BxS], axis=1)
  return jax.nn.one_hot(inputs_BxL, 10, dtype=jnp.float32), labels_BxL


def classification_loss(logits, labels) -> jax.Array:
  """Softmax cross-entropy averaged over every label: logits (..., K), int labels (...)."""
  # One-hot labels, not integer ones: the integer form's gradient is a scatter-add,
  # which XLA's CPU compiler constant-folds slowly at large batch × T.
  one_hot = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
  return jnp.mean(optax.softmax_cross_entropy(logits, one_hot))


memory_loss = classification_loss


def memory_baseline(T: int) -> float:
  """Cross-entropy of the best memoryless predictor: 10·ln(8) / (T + 20) (0.1733 at T=100)."""
  return MEMORY_SYMBOLS * math.log(MEMORY_ALPHABET) / (T + 2 * MEMORY_SYMBOLS)


def image_inputs(pixels_BxP) -> jax.Array:
  """uint8 pixels (B, P) as the network's inputs: float32 (B, P, 1) in [0, 1]."""
  return (pixels_BxP.astype(jnp.float32) / 255.0)[..., None]


def accuracy(logits_BxK, labels_B) -> jax.Array:
  """Share of the batch whose largest logit is its label: (B, K), (B,) -> scalar in [0, 1]."""
  return jnp.mean((jnp.argmax(logits_BxK, axis=-1) == labels_B).astype(jnp.float32))


class Task(NamedTuple):
  """A task's sizes, data, loss and baseline (`get_task`)."""
  name: str
  sample: Callable | None  # (key, B, T) -> (x (B, L, D), targets); None: images
  loss: Callable  # (outputs, targets) -> scalar
  baseline: Callable[[int], float]  # T -> a random guess's loss
  input_size: int
  output_size: int
  readout: str  # 'last' or 'all'
  length: Callable[[int], int]  # T -> L


_TASKS = {
    # The adding baseline: always predicting 1, the target's mean; Var(u1 + u2) = 1/6.
    "adding": Task("adding", adding_batch, lambda out_Bx1, y_B: adding_loss(out_Bx1[:, 0], y_B),
                   lambda T: 1.0 / 6.0, 2, 1, "last", lambda T: T),
    "memory": Task("memory", memory_batch, memory_loss, memory_baseline, 10, 9, "all",
                   lambda T: T + 2 * MEMORY_SYMBOLS),
    **{name: Task(name, None, classification_loss, lambda T: math.log(10), 1, 10, "last",
                  lambda T: T) for name in IMAGE_TASKS},
}


def get_task(name: str) -> Task:
  """The `Task` called `name` ('copy' is 'memory'). Raises ValueError for an unknown name."""
  name = {"copy": "memory"}.get(name, name)
  if name not in _TASKS:
    raise ValueError(f"unknown task {name!r}; choose from {sorted(_TASKS)} (or 'copy').")
  return _TASKS[name]


class Source(NamedTuple):
  """A task's data for `experiment.make_experiment`: hashable; the arrays (`ImageSets`) are args."""
  updates_per_epoch: int  # 0: no epochs; else no call crosses one
  epoch_data: Callable | None  # (data key, epoch) -> an image order
  train_batch: Callable  # (data key, u, epoch data, arrays) -> (x, targets)
  val_sets: Callable  # arrays -> {name: set} of the "val" records
  final_sets: Callable  # arrays -> {name: set} of the "final" records
  eval_batches: Callable  # set -> (count, initial-state key, j -> batch j)
  metrics: Callable  # (outputs, targets) -> {name in `names`: scalar}, "loss" first
  names: tuple[str, ...]
  split_eval: bool  # whether a data axis splits evaluation batches too


@functools.lru_cache(maxsize=16)
def synthetic_source(spec) -> Source:
  """The adding or memory problem's `Source` (cached); ValueError: an image task, set sizes."""
  task, size = get_task(spec.task), spec.eval_batch_size
  if task.sample is None:
    raise ValueError(f"task {spec.task!r} reads images: its source is `image_source`.")
  num_batches = spec.num_train // spec.batch_size if spec.num_train > 0 else 0
  for field in ("val_size", "eval_size"):
    if spec[field] % size:
      raise ValueError(f"{field} = {spec[field]} must be a multiple of eval_batch_size = {size}.")

  def train_batch(data_key, u, epoch_data, arrays):  # fresh data for num_train 0
    key = jax.random.fold_in(data_key, u % num_batches if num_batches else u)
    return task.sample(key, spec.batch_size, spec.T)

  def eval_batches(salt_and_count):  # set s: 1 val, 2 test
    salt, count = salt_and_count
    key = jax.random.fold_in(jax.random.key(spec.eval_seed), salt)
    return (count, jax.random.fold_in(key, 2**30),
            lambda j: task.sample(jax.random.fold_in(key, j), size, spec.T))

  val_sets = {"val": (1, spec.val_size // size)}
  final_sets = {"val": (1, spec.eval_size // size), "test": (2, spec.eval_size // size)}
  return Source(0, None, train_batch, lambda arrays: val_sets, lambda arrays: final_sets,
                eval_batches, lambda outputs, targets: {"loss": task.loss(outputs, targets)},
                ("loss",), split_eval=False)


@functools.lru_cache(maxsize=16)
def image_source(spec, num_train: int) -> Source:
  """A `Source` of num_train images (cached), a new order each epoch; ValueError: bad sizes."""
  if num_train < spec.batch_size:
    raise ValueError(f"{num_train} training images cannot fill a batch of {spec.batch_size}.")
  per_epoch, size = num_train // spec.batch_size, spec.eval_batch_size

  def epoch_data(data_key, epoch):
    return jax.random.permutation(jax.random.fold_in(data_key, epoch), num_train).astype(jnp.int32)

  def train_batch(data_key, u, order, sets):
    start = (u % per_epoch) * spec.batch_size
    batch = jax.lax.dynamic_slice_in_dim(order, start, spec.batch_size)
    return image_inputs(sets.train_x[batch]), sets.train_y[batch]

  def val_sets(sets):
    if sets.val_y.shape[0] % size or sets.test_y.shape[0] % size:
      raise ValueError(f"eval_batch_size = {size} must divide the {len(sets.val_y)} validation "
                       f"and {len(sets.test_y)} test images.")
    # Both sets as batch ranges of one array: one compiled evaluation reads either.
    pixels, labels = (jnp.concatenate(pair) for pair in ((sets.val_x, sets.test_x),
                                                         (sets.val_y, sets.test_y)))
    num_val = sets.val_y.shape[0] // size
    return {"val": (pixels, labels, 0, num_val),
            "test": (pixels, labels, num_val, sets.test_y.shape[0] // size)}

  def eval_batches(batch_range):
    pixels, labels, first, count = batch_range
    at = lambda a, j: jax.lax.dynamic_slice_in_dim(a, (first + j) * size, size)
    return count, jax.random.key(spec.eval_seed), lambda j: (image_inputs(at(pixels, j)),
                                                             at(labels, j))

  def metrics(logits, labels):
    return {"loss": classification_loss(logits, labels), "accuracy": accuracy(logits, labels)}

  return Source(per_epoch, epoch_data, train_batch, val_sets, lambda sets: {}, eval_batches,
                metrics, ("loss", "accuracy"), split_eval=True)
