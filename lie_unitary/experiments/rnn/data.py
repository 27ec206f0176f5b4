"""The RNN tasks: the adding and memory (copy) problems, and sequential images.

The adding and memory problems (Hochreiter & Schmidhuber 1997) are generated from a
PRNG key inside jit, for any sequence length T, as set up by Arjovsky et al. (2016)
and used by the paper (§4):

- adding: inputs (B, T, 2) = [value ~ U(0, 1), marker ∈ {0, 1}], one marker in
  [0, T//2), one in [T//2, T); target (B,) = the sum of the two marked values;
  loss: MSE on the last output. Predicting 1 always scores Var(u1 + u2) = 1/6.
- memory: 10 symbols from {1..8}, T - 1 blanks (0), the delimiter 9, 10 blanks:
  length T + 20, inputs one-hot over 10 classes (B, T+20, 10); labels (B, T+20) =
  T + 10 blanks then the 10 symbols (9 output classes); loss: softmax cross-entropy
  averaged over all T + 20 steps. Predicting blanks, then uniform over {1..8} for the
  last 10 steps, scores 10·ln(8)/(T + 20).

Beyond the paper, the table the orthogonal/unitary RNN literature reports: an
MNIST-family image read one pixel a step (T = 784): 'pixel' row by row, 'permuted' in
one fixed random order (`load_image_sets`); loss: softmax cross-entropy of the last
state's readout over 10 classes. Their data are the IDX files of a folder
(`lie_unitary.experiments.rnn.images`), held as `ImageSets`.

Letters in names: B batch, T sequence length (steps), D input features, K classes.
"""

from __future__ import annotations

import math
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

__all__ = [
    "IMAGE_TASKS",
    "ImageSets",
    "NUM_VALIDATION",
    "PERMUTATION_SEED",
    "TASKS",
    "Task",
    "accuracy",
    "adding_baseline",
    "adding_batch",
    "adding_loss",
    "classification_loss",
    "get_task",
    "image_inputs",
    "load_image_sets",
    "memory_baseline",
    "memory_batch",
    "memory_loss",
    "sequence_length",
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


def memory_loss(logits_BxLxK, labels_BxL) -> jax.Array:
  """Softmax cross-entropy averaged over batch and steps: (B, L, 9), (B, L) -> scalar."""
  # One-hot labels, not integer ones: the integer form's gradient is a scatter-add,
  # which XLA's CPU compiler constant-folds slowly at large batch × T.
  one_hot = jax.nn.one_hot(labels_BxL, logits_BxLxK.shape[-1], dtype=logits_BxLxK.dtype)
  return jnp.mean(optax.softmax_cross_entropy(logits_BxLxK, one_hot))


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

  Args:
    folder: a folder holding the four IDX files (`images.resolve_data_dir`).
    task: 'pixel' (row by row) or 'permuted' (the pixels in the fixed order
      `numpy.random.RandomState(seed).permutation(P)`).
    seed: the permutation's seed.
    num_validation: the last this many training images are the validation set.

  Raises:
    FileNotFoundError, ValueError: as `images.load_idx_dataset`; ValueError for an
      unknown task or no more training images than `num_validation`.
  """
  from lie_unitary.experiments.rnn import images
  if task not in IMAGE_TASKS:
    raise ValueError(f"unknown image task {task!r}; expected one of {IMAGE_TASKS}.")
  ds = images.load_idx_dataset(folder)
  if len(ds.train_images) <= num_validation:
    raise ValueError(f"{folder}: {len(ds.train_images)} training images; the validation "
                     f"split holds out the last {num_validation}.")
  split = images.train_validation_split(ds, num_validation)
  order = (images.pixel_permutation(seed, ds.train_images.shape[1]) if task == "permuted"
           else np.arange(ds.train_images.shape[1]))
  return ImageSets(split.train_images[:, order], split.train_labels,
                   split.validation_images[:, order], split.validation_labels,
                   ds.test_images[:, order], ds.test_labels)


def image_inputs(pixels_BxP) -> jax.Array:
  """uint8 pixels (B, P) as the network's inputs: float32 (B, P, 1) in [0, 1]."""
  return (pixels_BxP.astype(jnp.float32) / 255.0)[..., None]


def classification_loss(logits_BxK, labels_B) -> jax.Array:
  """Softmax cross-entropy averaged over the batch: (B, K), (B,) int -> scalar."""
  one_hot = jax.nn.one_hot(labels_B, logits_BxK.shape[-1], dtype=logits_BxK.dtype)
  return jnp.mean(optax.softmax_cross_entropy(logits_BxK, one_hot))


def accuracy(logits_BxK, labels_B) -> jax.Array:
  """Share of the batch whose largest logit is its label: (B, K), (B,) -> scalar in [0, 1]."""
  return jnp.mean((jnp.argmax(logits_BxK, axis=-1) == labels_B).astype(jnp.float32))


def sequence_length(task: str, T: int) -> int:
  """Number of steps the network reads: T for adding, T + 20 for memory."""
  return get_task(task).length(T)


class Task(NamedTuple):
  """One task behind one interface.

  Attributes:
    name: 'adding', 'memory', 'pixel' or 'permuted'.
    sample: (key, batch_size, T) -> (x_BxLxD float32, targets); None for the image
      tasks, whose batches come from `ImageSets`.
    loss: (model outputs, targets) -> scalar.
    baseline: T -> the random baseline's loss.
    input_size: D.
    output_size: outputs per step of the readout (1 or 9).
    readout: 'last' (one output per sequence) or 'all' (one per step).
    length: T -> L, the number of steps.
  """
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
