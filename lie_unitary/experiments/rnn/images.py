"""MNIST-family images (MNIST, Fashion-MNIST, KMNIST) from their IDX files, in numpy.

Each dataset is a folder of four IDX files, each possibly gzipped:

    train-images-idx3-ubyte  (60000, 28, 28) uint8     train-labels-idx1-ubyte  (60000,)
    t10k-images-idx3-ubyte   (10000, 28, 28) uint8     t10k-labels-idx1-ubyte   (10000,)

An IDX file is a 4-byte magic number (0, 0, the data type code, the number of
dimensions), one big-endian uint32 per dimension, then the values, big-endian, in C
order. `load_idx_dataset` flattens each image row by row to H·W pixels (784), the
order sequential (pixel-by-pixel) MNIST reads them in; `pixel_permutation` gives the
fixed order of permuted MNIST.

Where the files are (`resolve_data_dir`): an explicit folder; else
$LIE_UNITARY_DATA_DIR/<dataset>/; else, for Fashion-MNIST, the Debian/Ubuntu package
dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).

No jax here: the arrays are numpy, read once on the host.
"""

from __future__ import annotations

import gzip
import os
import struct
from typing import NamedTuple
import zlib

import numpy as np

__all__ = [
    "DATASETS", "DATA_DIR_ENV", "DEBIAN_FASHION_MNIST_DIR", "IDX_FILE_NAMES", "ImageDataset",
    "NUM_CLASSES", "TrainValidationSplit", "check_dataset_files", "load_idx_dataset",
    "pixel_permutation", "read_idx", "resolve_data_dir", "train_validation_split",
]

TRAIN_IMAGES = "train-images-idx3-ubyte"
TRAIN_LABELS = "train-labels-idx1-ubyte"
TEST_IMAGES = "t10k-images-idx3-ubyte"
TEST_LABELS = "t10k-labels-idx1-ubyte"
IDX_FILE_NAMES = (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)

NUM_CLASSES = 10

# The dataset names `resolve_data_dir` knows; anything else is taken as a folder.
DATASETS = ("fashion_mnist", "kmnist", "mnist")
DATA_DIR_ENV = "LIE_UNITARY_DATA_DIR"
# Where `apt-get install dataset-fashion-mnist` puts the four .gz files (Debian bookworm).
DEBIAN_FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"

_GZIP_MAGIC = b"\x1f\x8b"
# IDX data type codes; every multi-byte type is big-endian.
_IDX_DTYPES = {
    0x08: np.dtype("u1"),
    0x09: np.dtype("i1"),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_CHUNK = 1 << 24  # bytes per read: a corrupt header's huge dims cannot allocate at once

_HOW_TO_GET = {
    "mnist": "MNIST: from its homepage (yann.lecun.com/exdb/mnist) or any mirror",
    "fashion_mnist": ("Fashion-MNIST on Debian/Ubuntu: apt-get install dataset-fashion-mnist, "
                      "or from github.com/zalandoresearch/fashion-mnist"),
    "kmnist": "KMNIST: from github.com/rois-codh/kmnist",
}


class ImageDataset(NamedTuple):
  """One MNIST-family dataset, images flattened row by row.

  Attributes:
    train_images: (N_train, H·W) uint8, N_train = 60000, H·W = 784 for the standard files.
    train_labels: (N_train,) int32 in 0..9.
    test_images: (N_test, H·W) uint8, N_test = 10000.
    test_labels: (N_test,) int32 in 0..9.
    image_shape: (H, W) of the images as stored, (28, 28) for the standard files.
    folder: the folder the files were read from.
  """
  train_images: np.ndarray
  train_labels: np.ndarray
  test_images: np.ndarray
  test_labels: np.ndarray
  image_shape: tuple[int, int]
  folder: str


class TrainValidationSplit(NamedTuple):
  """The training set cut in two (`train_validation_split`); arrays are views, not copies.

  Attributes:
    train_images: (N_train - V, H·W) uint8.
    train_labels: (N_train - V,) int32.
    validation_images: (V, H·W) uint8, the last V training images.
    validation_labels: (V,) int32.
  """
  train_images: np.ndarray
  train_labels: np.ndarray
  validation_images: np.ndarray
  validation_labels: np.ndarray


def _read_up_to(f, n: int) -> bytearray:
  """Reads n bytes, or fewer at end of file; in chunks, so memory follows the data."""
  buf = bytearray()
  while len(buf) < n:
    chunk = f.read(min(_CHUNK, n - len(buf)))
    if not chunk:
      break
    buf += chunk
  return buf


def _count_rest(f) -> int:
  count = 0
  while chunk := f.read(_CHUNK):
    count += len(chunk)
  return count


def _read_idx_stream(f, path: str) -> np.ndarray:
  magic = f.read(4)
  if len(magic) < 4:
    raise ValueError(f"{path}: truncated IDX file: {len(magic)} bytes, the magic number "
                     "alone needs 4.")
  if magic[0] != 0 or magic[1] != 0:
    raise ValueError(f"{path}: not an IDX file: bad magic number 0x{magic.hex()} (expected "
                     "00 00, a data type code, the number of dimensions).")
  code, ndim = magic[2], magic[3]
  if code not in _IDX_DTYPES:
    known = ", ".join(f"0x{c:02X}" for c in _IDX_DTYPES)
    raise ValueError(f"{path}: bad magic number 0x{magic.hex()}: unknown IDX data type "
                     f"0x{code:02X} (known: {known}).")
  if ndim == 0:
    raise ValueError(f"{path}: bad magic number 0x{magic.hex()}: 0 dimensions.")
  header = f.read(4 * ndim)
  if len(header) < 4 * ndim:
    raise ValueError(f"{path}: truncated IDX file: the header has {len(header)} of the "
                     f"{4 * ndim} bytes of its {ndim} dimensions.")
  shape = struct.unpack(f">{ndim}I", header)
  dtype = _IDX_DTYPES[code]
  expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
  data = _read_up_to(f, expected)
  if len(data) < expected:
    raise ValueError(f"{path}: truncated IDX file: {len(data)} data bytes, its dimensions "
                     f"{shape} ({dtype.name}) need {expected}.")
  extra = _count_rest(f)
  if extra:
    raise ValueError(f"{path}: {extra} trailing bytes after the {expected} data bytes its "
                     f"dimensions {shape} ({dtype.name}) call for.")
  # A bytearray makes the array writable without a copy; multi-byte types become native.
  array = np.frombuffer(data, dtype).reshape(shape)
  return array.astype(dtype.newbyteorder("="), copy=False)


def read_idx(path: str | os.PathLike) -> np.ndarray:
  """Reads one IDX file, gzipped or not (told by its first two bytes, not its name).

  Args:
    path: the file.

  Returns:
    An array of the shape the header gives, in native byte order, of dtype uint8 (type
    0x08), int8 (0x09), int16 (0x0B), int32 (0x0C), float32 (0x0D) or float64 (0x0E):
    (N, 28, 28) uint8 for MNIST images, (N,) uint8 for labels.

  Raises:
    FileNotFoundError: the file does not exist.
    ValueError: a folder; a bad magic number (first two bytes not 0, an unknown type code,
      0 dimensions); fewer data bytes than the dimensions need (truncated), or more
      (trailing bytes); corrupt gzip data. Every message is one line naming the file.
  """
  path = os.fspath(path)
  if not os.path.exists(path):
    raise FileNotFoundError(f"{path}: no such IDX file.")
  if os.path.isdir(path):
    raise ValueError(f"{path}: a folder, not an IDX file.")
  with open(path, "rb") as raw:
    compressed = raw.read(2) == _GZIP_MAGIC
    raw.seek(0)
    if not compressed:
      return _read_idx_stream(raw, path)
    try:
      with gzip.GzipFile(fileobj=raw, mode="rb") as f:
        return _read_idx_stream(f, path)
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
      # EOFError: the gzip stream ends early (a partial download).
      reason = str(e).splitlines()[0] if str(e) else type(e).__name__
      raise ValueError(f"{path}: corrupt or truncated gzip data ({reason}).") from e


def idx_shape(path: str | os.PathLike) -> tuple[tuple[int, ...], np.dtype]:
  """An IDX file's (shape, dtype) from its header, with its size checked, without
  reading its data: the file's size (or, gzipped, the uncompressed size in the gzip
  trailer) must be what the header's dimensions call for.

  Raises:
    FileNotFoundError: no such file.
    ValueError: a bad magic number or header, or a size that is not the header's (a
      truncated or padded file), naming the file.
  """
  path = os.fspath(path)
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path}: no such IDX file.")
  with open(path, "rb") as raw:
    compressed = raw.read(2) == _GZIP_MAGIC
    raw.seek(0)
    try:
      f = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
      magic = f.read(4)
      if len(magic) < 4 or magic[:2] != b"\0\0" or magic[2] not in _IDX_DTYPES or not magic[3]:
        raise ValueError(f"{path}: not an IDX file: bad magic number 0x{magic.hex()}.")
      header = f.read(4 * magic[3])
    except (EOFError, OSError, zlib.error) as e:
      raise ValueError(f"{path}: corrupt or truncated gzip data ({e}).") from e
    if len(header) < 4 * magic[3]:
      raise ValueError(f"{path}: truncated IDX file: its header ends early.")
    shape, dtype = struct.unpack(f">{magic[3]}I", header), _IDX_DTYPES[magic[2]]
    want = 4 + len(header) + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if compressed:
      raw.seek(-4, os.SEEK_END)
      size, want = struct.unpack("<I", raw.read(4))[0], want % 2**32  # gzip's ISIZE
    else:
      size = os.fstat(raw.fileno()).st_size
  if size != want:
    raise ValueError(f"{path}: truncated or corrupt IDX file: {size} bytes"
                     f"{' uncompressed' if compressed else ''}, its header {shape} "
                     f"({dtype.name}) calls for {want}.")
  return shape, dtype


def _find_idx_file(folder: str, name: str) -> str | None:
  # The .gz first when both exist: it is the file as distributed, and its CRC is checked,
  # while an uncompressed copy beside it may be a half-finished extraction of it.
  for candidate in (name + ".gz", name):
    path = os.path.join(folder, candidate)
    if os.path.isfile(path):
      return path
  return None


def _expected_files_hint() -> str:
  names = ", ".join(IDX_FILE_NAMES)
  how = "; ".join(_HOW_TO_GET[d] for d in ("mnist", "fashion_mnist"))
  return f"expected the four IDX files {names} (each may end in .gz); get them: {how}"


def check_dataset_files(folder: str | os.PathLike) -> tuple[str, str, str, str]:
  """Checks that a folder holds the four IDX files, reading their headers only.

  Cheap enough to validate a config before any work directory is made: each file's
  header and size (`idx_shape`), images (N, H, W) uint8 and labels (N,) of the same N,
  and train and test images of one H × W.

  Args:
    folder: the dataset's folder.

  Returns:
    The paths of the train images, train labels, test images and test labels files, the
    `.gz` one of a name where both it and the uncompressed file exist.

  Raises:
    FileNotFoundError: no such folder, or a file is missing; the one-line message lists
      the four names expected and how to get them.
    ValueError: a truncated or corrupt file, or files that do not fit together.
  """
  folder = os.fspath(folder)
  if not os.path.isdir(folder):
    raise FileNotFoundError(f"{folder}: no such folder; {_expected_files_hint()}.")
  paths = [_find_idx_file(folder, name) for name in IDX_FILE_NAMES]
  missing = [name for name, path in zip(IDX_FILE_NAMES, paths) if path is None]
  if missing:
    raise FileNotFoundError(f"{folder}: missing {', '.join(missing)}; "
                            f"{_expected_files_hint()}.")
  (train_x, tx_type), (train_y, _), (test_x, _), (test_y, _) = map(idx_shape, paths)
  if len(train_x) != 3 or tx_type != np.uint8:
    raise ValueError(f"{paths[0]}: images must be (N, H, W) uint8; the header says {train_x} "
                     f"{tx_type}.")
  for images, labels, name in ((train_x, train_y, "train"), (test_x, test_y, "test")):
    if len(labels) != 1:
      raise ValueError(f"{folder}: {name} labels must be 1-D; the header says {labels}.")
    if labels[0] != images[0]:
      raise ValueError(f"{folder}: {images[0]} {name} images but {labels[0]} labels.")
  if tuple(train_x[1:]) != tuple(test_x[1:]):
    raise ValueError(f"{folder}: train images are {train_x[1:]} but test images "
                     f"{test_x[1:]}.")
  return tuple(paths)


def _labels(path: str, labels: np.ndarray) -> np.ndarray:
  if labels.ndim != 1 or labels.dtype.kind not in "iu":
    raise ValueError(f"{path}: labels must be 1-D integers; got shape {labels.shape} "
                     f"{labels.dtype}.")
  bad = (labels < 0) | (labels >= NUM_CLASSES)
  if bad.any():
    raise ValueError(f"{path}: {int(bad.sum())} labels outside 0..{NUM_CLASSES - 1} "
                     f"(min {labels.min()}, max {labels.max()}).")
  return labels.astype(np.int32)


def _images(path: str, images: np.ndarray) -> np.ndarray:
  if images.ndim != 3 or images.dtype != np.uint8:
    raise ValueError(f"{path}: images must be (N, H, W) uint8; got shape {images.shape} "
                     f"{images.dtype}.")
  return images.reshape(images.shape[0], -1)  # row by row: a view, no copy


def load_idx_dataset(folder: str | os.PathLike) -> ImageDataset:
  """Reads the four IDX files of an MNIST-family folder.

  Args:
    folder: holds train-images-idx3-ubyte, train-labels-idx1-ubyte,
      t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, each possibly .gz (the .gz
      is read where both exist).

  Returns:
    An `ImageDataset`: images (N, H·W) uint8 flattened row by row (any H × W is accepted,
    28 × 28 = 784 for the standard files; `image_shape` records it), labels (N,) int32.

  Raises:
    FileNotFoundError: no such folder or a missing file (the message lists the four names
      expected and how to get them).
    ValueError: any `read_idx` error; images not (N, H, W) uint8; labels not 1-D integers;
      images and labels of different counts; train and test images of different shapes;
      labels outside 0..9.
  """
  folder = os.fspath(folder)
  train_images_path, train_labels_path, test_images_path, test_labels_path = (
      check_dataset_files(folder))
  arrays = {}
  for split, images_path, labels_path in (("train", train_images_path, train_labels_path),
                                          ("test", test_images_path, test_labels_path)):
    images = read_idx(images_path)
    labels = read_idx(labels_path)
    flat = _images(images_path, images)
    if labels.ndim == 1 and len(labels) != len(images):
      raise ValueError(f"{folder}: {len(images)} {split} images ({images_path}) but "
                       f"{len(labels)} labels ({labels_path}).")
    arrays[split] = (flat, _labels(labels_path, labels), images.shape[1:])
  if arrays["train"][2] != arrays["test"][2]:
    raise ValueError(f"{folder}: train images are {arrays['train'][2]} but test images "
                     f"{arrays['test'][2]}.")
  return ImageDataset(
      train_images=arrays["train"][0], train_labels=arrays["train"][1],
      test_images=arrays["test"][0], test_labels=arrays["test"][1],
      image_shape=tuple(int(d) for d in arrays["train"][2]), folder=folder)


def _holds_files(folder: str) -> bool:
  return os.path.isdir(folder) and all(_find_idx_file(folder, n) for n in IDX_FILE_NAMES)


def resolve_data_dir(dataset: str, data_dir: str = "") -> str:
  """The folder holding a dataset's four IDX files.

  In order, the first that applies:

  1. `data_dir`, when not empty (it must hold the files: no fallback).
  2. `dataset` itself when it is not one of `DATASETS` ('fashion_mnist', 'kmnist',
     'mnist'): the path of a folder holding the files (write ./mnist for a folder
     named like a dataset).
  3. $LIE_UNITARY_DATA_DIR/<dataset>/ (e.g. $LIE_UNITARY_DATA_DIR/fashion_mnist/), when
     it holds the files. Only the sub-folder is looked at, never the files directly in
     $LIE_UNITARY_DATA_DIR: those would be taken for every dataset name, MNIST read
     for Fashion-MNIST without a word.
  4. For 'fashion_mnist', `DEBIAN_FASHION_MNIST_DIR` (/usr/share/datasets/fashion-mnist),
     where `apt-get install dataset-fashion-mnist` puts the files.

  `~` is expanded in `data_dir`, `dataset` and the environment variable. Only presence is
  checked (`check_dataset_files`); nothing is read.

  Args:
    dataset: 'mnist', 'fashion_mnist', 'kmnist', or a folder's path.
    data_dir: an explicit folder, or '' to look for one.

  Returns:
    The folder, as found (not made absolute).

  Raises:
    FileNotFoundError: nothing found; the one-line message names every place looked in,
      the files expected and how to get them.
  """
  if data_dir:
    folder = os.path.expanduser(data_dir)
    check_dataset_files(folder)
    return folder
  if dataset not in DATASETS:
    folder = os.path.expanduser(dataset)
    if not os.path.isdir(folder):
      raise FileNotFoundError(f"dataset {dataset!r}: neither one of {', '.join(DATASETS)} "
                              f"nor a folder; {_expected_files_hint()}.")
    check_dataset_files(folder)
    return folder
  looked = []
  root = os.environ.get(DATA_DIR_ENV, "")
  if root:
    folder = os.path.join(os.path.expanduser(root), dataset)
    if _holds_files(folder):
      return folder
    looked.append(f"${DATA_DIR_ENV}/{dataset} ({folder})")
  else:
    looked.append(f"${DATA_DIR_ENV}/{dataset} (${DATA_DIR_ENV} unset)")
  if dataset == "fashion_mnist":
    if _holds_files(DEBIAN_FASHION_MNIST_DIR):
      return DEBIAN_FASHION_MNIST_DIR
    looked.append(DEBIAN_FASHION_MNIST_DIR)
  names = ", ".join(IDX_FILE_NAMES)
  raise FileNotFoundError(
      f"{dataset}: no folder with its four IDX files ({names}, each may end in .gz); "
      f"looked in {' and '.join(looked)}; pass data_dir, or set ${DATA_DIR_ENV}; get them: "
      f"{_HOW_TO_GET[dataset]}.")


def train_validation_split(ds: ImageDataset, num_validation: int = 5000
                           ) -> TrainValidationSplit:
  """Holds out the LAST `num_validation` training images for validation.

  The last ones, not a random draw: the split is the same everywhere with no seed to
  carry, and the test set stays untouched for the final number.

  Args:
    ds: a dataset from `load_idx_dataset`.
    num_validation: V, in 0..N_train - 1 (0: an empty validation set).

  Returns:
    A `TrainValidationSplit` of views: images 0..N_train - V - 1 for training, the last V
    for validation (55000 and 5000 for the standard files).

  Raises:
    ValueError: V not an integer in 0..N_train - 1.
  """
  n = len(ds.train_images)
  if (isinstance(num_validation, bool) or not isinstance(num_validation, (int, np.integer))
      or not 0 <= num_validation < n):
    raise ValueError(f"num_validation must be an integer in 0..{n - 1} (there are {n} "
                     f"training images); got {num_validation!r}.")
  cut = n - int(num_validation)
  return TrainValidationSplit(
      train_images=ds.train_images[:cut], train_labels=ds.train_labels[:cut],
      validation_images=ds.train_images[cut:], validation_labels=ds.train_labels[cut:])


def pixel_permutation(seed: int = 92916, num_pixels: int = 784) -> np.ndarray:
  """The fixed pixel order of permuted MNIST: `np.random.RandomState(seed).permutation`.

  The default seed gives the permutation of the expRNN code (Lezcano-Casado &
  Martínez-Rubio, 2019; scoRNN's code uses the same seed), so results compare with
  theirs. Apply it as they do, `images[:, perm]`: step t reads pixel perm[t] of the
  row-by-row flattened image.

  Args:
    seed: the RandomState seed.
    num_pixels: H·W, 784 for 28 × 28 images.

  Returns:
    (num_pixels,) int64 (numpy's default integer), a permutation of 0..num_pixels - 1.
  """
  return np.random.RandomState(seed).permutation(num_pixels)
