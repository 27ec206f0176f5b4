"""The RNN tasks: the adding and memory (copy) problems, and sequential images.

The adding and memory problems (Hochreiter & Schmidhuber 1997, set up as by Arjovsky
et al. 2016 and the paper's §4) are generated from a PRNG key inside jit, for any
sequence length T (`adding_batch`, `memory_batch`). Beyond the paper: an MNIST-family
image read one pixel a step (T = 784), 'pixel' row by row or 'permuted' in one fixed
random order (`load_image_sets`), classified from the last state.

A unit's programs (`rnn.trainer.make_experiment`) read a task's data through a
`Source` (`synthetic_source`, `image_source`). Letters in names: B batch, T sequence
length, L steps, D input features, K classes.
"""

from __future__ import annotations

import functools
import math
from typing import Any
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from lie_unitary.experiments.rnn import images

__all__ = [
    "IMAGE_TASKS", "ImageSets", "NUM_VALIDATION", "PERMUTATION_SEED", "Source", "TASKS", "Task",
    "accuracy", "adding_baseline", "adding_batch", "adding_loss", "classification_loss",
    "get_task", "image_inputs", "image_source", "load_image_sets", "memory_baseline",
    "memory_batch", "memory_loss", "synthetic_source",
]

MEMORY_SYMBOLS = 10   # symbols to remember
MEMORY_ALPHABET = 8   # symbols drawn from {1..8}
MEMORY_BLANK = 0
MEMORY_DELIMITER = 9
MEMORY_INPUT_CLASSES = 10   # blank, 8 symbols, delimiter
MEMORY_OUTPUT_CLASSES = 9   # blank, 8 symbols


def _check_batch_args(batch_size, T, min_T):
  if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
    raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}.")
  if isinstance(T, bool) or not isinstance(T, int) or T < min_T:
    raise ValueError(f"T must be an integer ≥ {min_T}; got {T!r}.")


def adding_batch(key, batch_size: int, T: int) -> tuple[jax.Array, jax.Array]:
  """A batch of the adding problem.

  Args:
    key: a PRNG key.
    batch_size: B.
    T: sequence length, ≥ 2.

  Returns:
    x_BxTx2: float32, channel 0 the values ~ U(0, 1), channel 1 the two markers
      (exactly one 1 in [0, T//2) and one in [T//2, T)).
    y_B: float32, the sum of the two marked values.

  Raises:
    ValueError: for a non-positive batch size or T < 2.
  """
  _check_batch_args(batch_size, T, 2)
  k_val, k_first, k_second = jax.random.split(key, 3)
  values_BxT = jax.random.uniform(k_val, (batch_size, T), jnp.float32)
  half = T // 2
  first_B = jax.random.randint(k_first, (batch_size,), 0, half)
  second_B = jax.random.randint(k_second, (batch_size,), half, T)
  steps_T = jnp.arange(T)
  markers_BxT = ((steps_T == first_B[:, None]) | (steps_T == second_B[:, None])).astype(
      jnp.float32)
  y_B = jnp.sum(values_BxT * markers_BxT, axis=1)
  return jnp.stack([values_BxT, markers_BxT], axis=-1), y_B


def adding_loss(pred_B, y_B) -> jax.Array:
  """Mean squared error over the batch: pred_B (B,) float, y_B (B,) float -> scalar."""
  return jnp.mean((pred_B - y_B) ** 2)


def adding_baseline(T: int | None = None) -> float:
  """MSE of always predicting 1 (the target's mean): Var(u1 + u2) = 1/6, for any T."""
  del T
  return 1.0 / 6.0


def memory_batch(key, batch_size: int, T: int) -> tuple[jax.Array, jax.Array]:
  """A batch of the memory (copy) problem with T - 1 blanks between data and delimiter.

  Args:
    key: a PRNG key.
    batch_size: B.
    T: the memory duration, ≥ 1; sequences have length T + 20.

  Returns:
    x_BxLx10: float32 one-hot inputs, L = T + 20: symbols at steps 0..9, blanks at
      10..T+8, the delimiter 9 at step T+9, blanks at T+10..T+19.
    labels_BxL: int32 targets in 0..8: blank (0) at steps 0..T+9, then the 10 symbols.

  Raises:
    ValueError: for a non-positive batch size or T < 1.
  """
  _check_batch_args(batch_size, T, 1)
  L = T + 2 * MEMORY_SYMBOLS
  symbols_BxS = jax.random.randint(key, (batch_size, MEMORY_SYMBOLS), 1,
                                   MEMORY_ALPHABET + 1, jnp.int32)
  blanks = jnp.full((batch_size, T - 1), MEMORY_BLANK, jnp.int32)
  delimiter = jnp.full((batch_size, 1), MEMORY_DELIMITER, jnp.int32)
  tail = jnp.full((batch_size, MEMORY_SYMBOLS), MEMORY_BLANK, jnp.int32)
  inputs_BxL = jnp.concatenate([symbols_BxS, blanks, delimiter, tail], axis=1)
  labels_BxL = jnp.concatenate(
      [jnp.full((batch_size, L - MEMORY_SYMBOLS), MEMORY_BLANK, jnp.int32), symbols_BxS],
      axis=1)
  return jax.nn.one_hot(inputs_BxL, MEMORY_INPUT_CLASSES, dtype=jnp.float32), labels_BxL


def classification_loss(logits, labels) -> jax.Array:
  """Softmax cross-entropy averaged over every label: float logits (..., K) and integer
  labels (...), e.g. (B, K) and (B,), or the memory problem's (B, L, 9) and (B, L) ->
  scalar."""
  # One-hot labels, not integer ones: the integer form's gradient is a scatter-add,
  # which XLA's CPU compiler constant-folds slowly at large batch × T.
  one_hot = jax.nn.one_hot(labels, logits.shape[-1], dtype=logits.dtype)
  return jnp.mean(optax.softmax_cross_entropy(logits, one_hot))


memory_loss = classification_loss


def memory_baseline(T: int) -> float:
  """Cross-entropy of the best memoryless predictor: 10·ln(8) / (T + 20) (0.1733 at T=100)."""
  return MEMORY_SYMBOLS * math.log(MEMORY_ALPHABET) / (T + 2 * MEMORY_SYMBOLS)


# Sequential images (beyond the paper): an MNIST-family image read one pixel a step.

IMAGE_TASKS = ("pixel", "permuted")
# The fixed pixel order of the permuted task, as expRNN's code draws it.
PERMUTATION_SEED = 92916
NUM_VALIDATION = 5_000  # the last training images, held out


class ImageSets(NamedTuple):
  """An image task's data, pixels in the order the network reads them.

  Attributes:
    train_x, val_x, test_x: uint8 (N, P): P pixels per image (784 for 28 × 28),
      permuted for the 'permuted' task. The validation set is the last
      `num_validation` training images (5,000 by default); the test set the test
      images.
    train_y, val_y, test_y: int32 (N,) labels in 0..9.
  """
  train_x: jax.Array
  train_y: jax.Array
  val_x: jax.Array
  val_y: jax.Array
  test_x: jax.Array
  test_y: jax.Array


def load_image_sets(folder: str, task: str, seed: int = PERMUTATION_SEED,
                    num_validation: int = NUM_VALIDATION) -> ImageSets:
  """An IDX folder's images as the sets of `task` ('pixel' or 'permuted'), as numpy.

  The validation set is the LAST `num_validation` training images, not a random draw:
  the same everywhere with no seed to carry, and the test set stays untouched.

  Args:
    folder: a folder holding the four IDX files (`images.resolve_data_dir`).
    task: 'pixel' (row by row) or 'permuted' (the pixels in the fixed order
      `numpy.random.RandomState(seed).permutation(P)`; the default seed gives expRNN's
      and scoRNN's order, so results compare with theirs).
    seed: the permutation's seed.
    num_validation: V, in 1..N_train - 1.

  Returns:
    `ImageSets` of numpy arrays: N_train - V training, V validation and the test images.

  Raises:
    FileNotFoundError, ValueError: as `images.load_idx_dataset`; ValueError for an
      unknown task or a V out of range.
  """
  if task not in IMAGE_TASKS:
    raise ValueError(f"unknown image task {task!r}; expected one of {IMAGE_TASKS}.")
  ds = images.load_idx_dataset(folder)
  n, pixels = ds.train_images.shape
  if (isinstance(num_validation, bool) or not isinstance(num_validation, (int, np.integer))
      or not 0 < num_validation < n):
    raise ValueError(f"{folder}: num_validation must be an integer in 1..{n - 1} (there are "
                     f"{n} training images); got {num_validation!r}.")
  order = (np.random.RandomState(seed).permutation(pixels) if task == "permuted"
           else np.arange(pixels))
  x, y, cut = ds.train_images[:, order], ds.train_labels, n - int(num_validation)
  return ImageSets(x[:cut], y[:cut], x[cut:], y[cut:], ds.test_images[:, order],
                   ds.test_labels)


def image_inputs(pixels_BxP) -> jax.Array:
  """uint8 pixels (B, P) as the network's inputs: float32 (B, P, 1) in [0, 1]."""
  return (pixels_BxP.astype(jnp.float32) / 255.0)[..., None]


def accuracy(logits_BxK, labels_B) -> jax.Array:
  """Share of the batch whose largest logit is its label: (B, K), (B,) -> scalar in [0, 1]."""
  return jnp.mean((jnp.argmax(logits_BxK, axis=-1) == labels_B).astype(jnp.float32))


class Task(NamedTuple):
  """One task behind one interface: its `name`; `sample` (key, batch_size, T) ->
  (x_BxLxD float32, targets), None for the image tasks (their batches come from
  `ImageSets`); `loss` (model outputs, targets) -> scalar; `baseline` T -> the random
  baseline's loss; `input_size` D; `output_size` per step of the readout; `readout`
  'last' (one output per sequence) or 'all' (one per step); `length` T -> L."""
  name: str
  sample: Callable[..., tuple[jax.Array, jax.Array]]
  loss: Callable[[jax.Array, jax.Array], jax.Array]
  baseline: Callable[[int], float]
  input_size: int
  output_size: int
  readout: str
  length: Callable[[int], int]


TASKS: dict[str, Task] = {
    "adding": Task("adding", adding_batch, lambda out_Bx1, y_B: adding_loss(out_Bx1[:, 0], y_B),
                   adding_baseline, 2, 1, "last", lambda T: T),
    "memory": Task("memory", memory_batch, memory_loss, memory_baseline,
                   MEMORY_INPUT_CLASSES, MEMORY_OUTPUT_CLASSES, "all",
                   lambda T: T + 2 * MEMORY_SYMBOLS),
    # Images: batches come from `ImageSets` (no `sample`); T is the pixel count; the
    # baseline is the cross-entropy of a uniform guess over the 10 classes.
    **{name: Task(name, None, classification_loss, lambda T: math.log(10), 1, 10, "last",
                  lambda T: T) for name in IMAGE_TASKS},
}


def get_task(name: str) -> Task:
  """The `Task` called `name` ('adding', 'memory', 'pixel' or 'permuted'; 'copy' is an
  alias of 'memory').

  Raises:
    ValueError: an unknown name.
  """
  name = {"copy": "memory"}.get(name, name)
  if name not in TASKS:
    raise ValueError(f"unknown task {name!r}; choose from {sorted(TASKS)} (or 'copy').")
  return TASKS[name]


# A unit's data as its programs read them --------------------------------------------


class Source(NamedTuple):
  """Where a unit's batches come from and what is measured on them: what differs
  between the tasks, for `rnn.trainer.make_experiment`'s one step and one evaluation.
  Hashable (it keys the cache of compiled programs): the data's arrays (`ImageSets`)
  are arguments of the programs (`arrays`), not part of it.

  Attributes:
    updates_per_epoch: S > 0: a call of updates never crosses an epoch's end and each
      epoch has its `epoch_data`; 0: no epochs.
    epoch_data: (replicate's data key, epoch) -> its data of that epoch; None: none.
    train_batch: (data key, update u, epoch data, arrays) -> update u's batch
      (inputs (B, L, D) float32, targets).
    val_sets: arrays -> {name: set}: the sets every "val" record evaluates (a set: a
      pytree that `eval_batches` reads; a source's sets all have one structure and
      shape, so one compiled evaluation reads each of them).
    final_sets: arrays -> {name: set}: the sets the "final" records evaluate.
    eval_batches: a set -> (number of batches, initial-state key, j -> batch j's
      (inputs, targets)), traced inside the evaluation.
    metrics: (model outputs, targets) -> {name: scalar} for each of `names`.
    names: the metrics, "loss" (what training minimises) first.
    split_eval: whether a data axis splits evaluation batches as it splits training
      batches; False: every device of a data row evaluates whole batches, so a random
      initial state gives the numbers of one device.
  """
  updates_per_epoch: int
  epoch_data: Callable | None
  train_batch: Callable
  val_sets: Callable[[Any], dict]
  final_sets: Callable[[Any], dict]
  eval_batches: Callable
  metrics: Callable[[jax.Array, jax.Array], dict]
  names: tuple[str, ...]
  split_eval: bool


@functools.lru_cache(maxsize=16)
def synthetic_source(spec) -> Source:
  """The adding or memory problem's data for a unit's frozen `spec` (cached: one source
  per spec). Batch u of a replicate is sampled from fold_in(data key, u mod (num_train
  / batch_size)) (num_train = 0: fold_in(data key, u), fresh data). Sets: generated,
  never stored, from a salt (1 val, 2 test) and a batch count: batch j from
  fold_in(fold_in(key(eval_seed), salt), j), the initial states from fold_in(that key,
  2³⁰), the same for every batch; "val" records evaluate val_size validation
  sequences, "final" ones eval_size validation and test sequences. Metric: "loss".

  Raises:
    ValueError: an image task, or a val_size or eval_size that is not a multiple of
      eval_batch_size.
  """
  task = get_task(spec.task)
  if task.sample is None:
    raise ValueError(f"task {spec.task!r} reads images: its source is `image_source`.")
  num_batches = spec.num_train // spec.batch_size if spec.num_train > 0 else 0
  size = spec.eval_batch_size
  for field in ("val_size", "eval_size"):
    if spec[field] % size:
      raise ValueError(f"{field} = {spec[field]} must be a multiple of eval_batch_size = {size}.")

  def train_batch(data_key, u, epoch_data, arrays):
    del epoch_data, arrays
    key = jax.random.fold_in(data_key, u % num_batches if num_batches else u)
    return task.sample(key, spec.batch_size, spec.T)

  def eval_batches(salt_and_count):
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
  """A sequential-image unit's data (`ImageSets` on the devices, the programs' `arrays`),
  for a frozen `spec` and N = num_train training images (cached).

  Epoch e of a replicate visits the images in the order permutation(fold_in(data key,
  e), N), (N,) int32; update u reads order[(u mod S)·B : (u mod S + 1)·B], S = N // B
  updates per epoch (the last N mod B images of an order are left out). The sets are
  the arrays' validation and test images, whole, in batches of spec.eval_batch_size
  (each a range of batches of the two sets' concatenation), the initial states from
  key(eval_seed): "val" records evaluate both, "final" records none. Metrics: "loss"
  and "accuracy".

  Raises:
    ValueError: a task that is not an image task, or fewer training images than a
      batch; from `val_sets`, a set whose size eval_batch_size does not divide.
  """
  if spec.task not in IMAGE_TASKS:
    raise ValueError(f"task {spec.task!r} is not an image task {IMAGE_TASKS}.")
  if num_train < spec.batch_size:
    raise ValueError(f"{num_train} training images cannot fill a batch of {spec.batch_size}.")
  per_epoch, size = num_train // spec.batch_size, spec.eval_batch_size

  def epoch_data(data_key, epoch):
    return jax.random.permutation(jax.random.fold_in(data_key, epoch), num_train).astype(
        jnp.int32)

  def train_batch(data_key, u, order, sets):
    del data_key
    batch = jax.lax.dynamic_slice_in_dim(order, (u % per_epoch) * spec.batch_size,
                                         spec.batch_size)
    return image_inputs(sets.train_x[batch]), sets.train_y[batch]

  def val_sets(sets):
    for labels in (sets.val_y, sets.test_y):
      if labels.shape[0] % size:
        raise ValueError(f"{labels.shape[0]} images are not a multiple of "
                         f"eval_batch_size = {size}.")
    # Both sets as batch ranges of one array (a copy of a few MB): the same shapes, so
    # one compiled evaluation program reads either.
    pixels, labels = (jnp.concatenate(pair) for pair in ((sets.val_x, sets.test_x),
                                                         (sets.val_y, sets.test_y)))
    num_val = sets.val_y.shape[0] // size
    return {"val": (pixels, labels, 0, num_val),
            "test": (pixels, labels, num_val, sets.test_y.shape[0] // size)}

  def eval_batches(batch_range):
    pixels, labels, first, count = batch_range
    at = lambda a, j: jax.lax.dynamic_slice_in_dim(a, (first + j) * size, size)
    rows = lambda j: (image_inputs(at(pixels, j)), at(labels, j))
    return count, jax.random.key(spec.eval_seed), rows

  def metrics(logits, labels):
    return {"loss": classification_loss(logits, labels), "accuracy": accuracy(logits, labels)}

  return Source(per_epoch, epoch_data, train_batch, val_sets, lambda sets: {}, eval_batches,
                metrics, ("loss", "accuracy"), split_eval=True)
