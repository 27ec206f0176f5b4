"""MNIST-family images (MNIST, Fashion-MNIST, KMNIST) from their IDX files, in numpy.

A dataset is a folder of four IDX files, each possibly gzipped:

    train-images-idx3-ubyte  (60000, 28, 28) uint8     train-labels-idx1-ubyte  (60000,)
    t10k-images-idx3-ubyte   (10000, 28, 28) uint8     t10k-labels-idx1-ubyte   (10000,)

An IDX file is a 4-byte magic number (0, 0, the data type code, the number of
dimensions), one big-endian uint32 per dimension, then the values, big-endian, in C
order. Images are flattened row by row to H·W pixels, the order sequential MNIST reads
them in.
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
    "NUM_CLASSES", "check_dataset_files", "default_folder", "load_idx_dataset", "read_idx",
    "resolve_data_dir",
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

# IDX data type codes; every multi-byte type is big-endian.
_IDX_DTYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
               0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
_HOW_TO_GET = {
    "mnist": "MNIST: from its homepage (yann.lecun.com/exdb/mnist) or any mirror",
    "fashion_mnist": ("Fashion-MNIST on Debian/Ubuntu: apt-get install dataset-fashion-mnist, "
                      "or from github.com/zalandoresearch/fashion-mnist"),
    "kmnist": "KMNIST: from github.com/rois-codh/kmnist",
}
_EXPECTED = (f"expected the four IDX files {', '.join(IDX_FILE_NAMES)} (each may end in .gz); "
             f"get them: {_HOW_TO_GET['mnist']}; {_HOW_TO_GET['fashion_mnist']}")


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


def _read(path, whole: bool):
  """(shape, dtype, data) of an IDX file, gzipped or not (told by its first two bytes):
  `whole`: its data bytes, read and counted; else None, the size checked against the
  header without reading the data (the file's size, or gzip's trailer)."""
  if os.path.isdir(path):
    raise ValueError(f"{path}: a folder, not an IDX file.")
  if not os.path.isfile(path):
    raise FileNotFoundError(f"{path}: no such IDX file.")
  with open(path, "rb") as raw:
    compressed = raw.read(2) == b"\x1f\x8b"
    raw.seek(0)
    f = gzip.GzipFile(fileobj=raw, mode="rb") if compressed else raw
    try:
      magic = f.read(4)
      if len(magic) < 4:
        raise ValueError(f"{path}: truncated IDX file: {len(magic)} bytes, the magic number "
                         "alone needs 4.")
      code, ndim = magic[2], magic[3]
      why = ("expected 00 00, a data type code, the number of dimensions"
             if magic[:2] != b"\0\0" else "0 dimensions" if not ndim else
             None if code in _IDX_DTYPES else f"unknown IDX data type 0x{code:02X}")
      if why:
        raise ValueError(f"{path}: not an IDX file: bad magic number 0x{magic.hex()} ({why}).")
      header = f.read(4 * ndim)
      if len(header) < 4 * ndim:
        raise ValueError(f"{path}: truncated IDX file: the header has {len(header)} of the "
                         f"{4 * ndim} bytes of its {ndim} dimensions.")
      shape, dtype = struct.unpack(f">{ndim}I", header), _IDX_DTYPES[code]
      want = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
      data = f.read() if whole else None  # to the end: a gzip stream's CRC is checked
      if whole:
        size = len(data)
      elif compressed:  # gzip's trailer: the uncompressed size mod 2³²
        raw.seek(-4, os.SEEK_END)
        size, want = (struct.unpack("<I", raw.read(4))[0] - 4 - 4 * ndim) % 2**32, want % 2**32
      else:
        size = os.fstat(raw.fileno()).st_size - 4 - 4 * ndim
    except (EOFError, OSError, zlib.error) as e:
      if not compressed:
        raise
      # EOFError: the gzip stream ends early (a partial download).
      reason = str(e).splitlines()[0] if str(e) else type(e).__name__
      raise ValueError(f"{path}: corrupt or truncated gzip data ({reason}).") from e
  if size != want:
    extra = f" ({size - want} trailing bytes)" if size > want else ""
    raise ValueError(f"{path}: truncated or corrupt IDX file{extra}: {size} data bytes"
                     f"{' uncompressed' if compressed else ''}, its dimensions {shape} "
                     f"({dtype.name}) need {want}.")
  return shape, dtype, data


def read_idx(path: str | os.PathLike) -> np.ndarray:
  """Reads one IDX file, gzipped or not (told by its first two bytes, not its name).

  Args:
    path: the file.

  Returns:
    An array of the shape the header gives, in native byte order, writable, of dtype
    uint8 (type 0x08), int8 (0x09), int16 (0x0B), int32 (0x0C), float32 (0x0D) or float64
    (0x0E): (N, 28, 28) uint8 for MNIST images, (N,) uint8 for labels.

  Raises:
    FileNotFoundError: the file does not exist.
    ValueError: a folder; a bad magic number (first two bytes not 0, an unknown type code,
      0 dimensions); fewer data bytes than the dimensions need (truncated), or more
      (trailing bytes); corrupt gzip data. Every message is one line naming the file.
  """
  shape, dtype, data = _read(os.fspath(path), whole=True)
  return np.frombuffer(data, dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _find(folder: str) -> list[str | None]:
  """Each of the four files' path in `folder`, None where missing. The .gz first when
  both exist: it is the file as distributed, and its CRC is checked, while an
  uncompressed copy beside it may be a half-finished extraction of it."""
  paths = ([os.path.join(folder, n) for n in (name + ".gz", name)] for name in IDX_FILE_NAMES)
  return [next((p for p in pair if os.path.isfile(p)), None) for pair in paths]


def check_dataset_files(folder: str | os.PathLike) -> tuple[str, str, str, str]:
  """Checks that a folder holds the four IDX files from their headers and sizes only
  (cheap enough to validate a config): images (N, H, W) uint8 and integer labels (N,)
  of the same N, train and test images of one H × W.

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
    raise FileNotFoundError(f"{folder}: no such folder; {_EXPECTED}.")
  paths = _find(folder)
  missing = [name for name, path in zip(IDX_FILE_NAMES, paths) if path is None]
  if missing:
    raise FileNotFoundError(f"{folder}: missing {', '.join(missing)}; {_EXPECTED}.")
  headers = [_read(p, whole=False)[:2] for p in paths]
  for split, (images, image_type), (labels, label_type), path in (
      ("train", *headers[:2], paths[0]), ("test", *headers[2:], paths[2])):
    if len(images) != 3 or image_type != np.uint8:
      raise ValueError(f"{path}: images must be (N, H, W) uint8; the header says {images} "
                       f"{image_type}.")
    if len(labels) != 1 or label_type.kind not in "iu":
      raise ValueError(f"{folder}: {split} labels must be 1-D integers; the header says "
                       f"{labels} {label_type}.")
    if labels[0] != images[0]:
      raise ValueError(f"{folder}: {images[0]} {split} images but {labels[0]} labels.")
  if headers[0][0][1:] != headers[2][0][1:]:
    raise ValueError(f"{folder}: train images are {headers[0][0][1:]} but test images "
                     f"{headers[2][0][1:]}.")
  return tuple(paths)


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
    ValueError: as `check_dataset_files` and `read_idx`; labels outside 0..9.
  """
  folder = os.fspath(folder)
  paths = check_dataset_files(folder)
  train_x, train_y, test_x, test_y = map(read_idx, paths)
  for path, labels in ((paths[1], train_y), (paths[3], test_y)):
    bad = (labels < 0) | (labels >= NUM_CLASSES)
    if bad.any():
      raise ValueError(f"{path}: {int(bad.sum())} labels outside 0..{NUM_CLASSES - 1} "
                       f"(min {labels.min()}, max {labels.max()}).")
  flat = lambda images: images.reshape(len(images), -1)  # row by row: a view, no copy
  return ImageDataset(flat(train_x), train_y.astype(np.int32), flat(test_x),
                      test_y.astype(np.int32), tuple(int(d) for d in train_x.shape[1:]), folder)


def default_folder(dataset: str) -> str:
  """Where a dataset is looked for, and downloaded to, by default:
  $LIE_UNITARY_DATA_DIR/<dataset> when that variable is set, else
  ~/.cache/lie_unitary/<dataset> ($XDG_CACHE_HOME for ~/.cache when set)."""
  root = os.environ.get(DATA_DIR_ENV, "")
  if not root:
    root = os.path.join(os.environ.get("XDG_CACHE_HOME", "") or "~/.cache", "lie_unitary")
  return os.path.join(os.path.expanduser(root), dataset)


def resolve_data_dir(dataset: str, data_dir: str = "") -> str:
  """The folder holding a dataset's four IDX files: the first that applies of

  1. `data_dir`, when not empty (checked by `check_dataset_files`: no fallback);
  2. `dataset` itself, the path of a folder, when it is not one of `DATASETS` (write
     ./mnist for a folder named like a dataset; checked likewise);
  3. `default_folder(dataset)` when it holds the files: $LIE_UNITARY_DATA_DIR/<dataset>/
     (never the files directly in $LIE_UNITARY_DATA_DIR: those would be taken for every
     dataset name), else ~/.cache/lie_unitary/<dataset>/, where `download` puts them;
  4. for 'fashion_mnist', `DEBIAN_FASHION_MNIST_DIR`, where `apt-get install
     dataset-fashion-mnist` puts the files.

  Args:
    dataset: 'mnist', 'fashion_mnist', 'kmnist', or a folder's path (`~` expanded).
    data_dir: an explicit folder (`~` expanded), or '' to look for one.

  Returns:
    The folder, as found (not made absolute).

  Raises:
    FileNotFoundError: nothing found; the one-line message names every place looked in,
      the files expected and how to get them.
    ValueError: in cases 1 and 2, as `check_dataset_files`.
  """
  if data_dir or dataset not in DATASETS:
    folder = os.path.expanduser(data_dir or dataset)
    if not data_dir and not os.path.isdir(folder):
      raise FileNotFoundError(f"dataset {dataset!r}: neither one of {', '.join(DATASETS)} "
                              f"nor a folder; {_EXPECTED}.")
    check_dataset_files(folder)
    return folder
  places = [default_folder(dataset)] + [DEBIAN_FASHION_MNIST_DIR] * (dataset == "fashion_mnist")
  for folder in places:
    if os.path.isdir(folder) and all(_find(folder)):
      return folder
  raise FileNotFoundError(
      f"{dataset}: no folder with its four IDX files ({', '.join(IDX_FILE_NAMES)}, each may "
      f"end in .gz); looked in {' and '.join(places)}; download them there with "
      f"--config.download=True (or lie_unitary.experiments.rnn.download.download"
      f"({dataset!r})), pass data_dir, or set ${DATA_DIR_ENV}; or get them by hand: "
      f"{_HOW_TO_GET[dataset]}.")
