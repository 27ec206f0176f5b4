"""MNIST-family images as a task's sets: a dataset's folder (`resolve_data_dir`), its four
IDX files (each possibly gzipped: a magic number 0, 0, a type code, the number of dimensions;
a big-endian uint32 per dimension; the values big-endian in C order), the sets read."""

import collections
import gzip
import json
import os
import pathlib
import struct
import zlib

import numpy as np

IDX_FILE_NAMES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                  "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
# The datasets known by name: how to get them by hand, where a system package puts them, the
# mirrors `download` tries in order, each gzipped file's md5 as its authors publish it.
DATASETS = json.loads(pathlib.Path(__file__).with_name("datasets.json").read_text("utf-8"))
DATA_DIR_ENV = "LIE_UNITARY_DATA_DIR"
_PERMUTATION_SEED = 92916  # the permuted task's pixel order, as expRNN's code draws it
_IDX_DTYPES = {0x08: np.dtype("u1"), 0x09: np.dtype("i1"), 0x0B: np.dtype(">i2"),
               0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
_EXPECTED = (f"expected the four IDX files {', '.join(IDX_FILE_NAMES)} (each may end in .gz); "
             f"get them: {DATASETS['mnist']['how_to_get']}; "
             f"{DATASETS['fashion_mnist']['how_to_get']}")


# An image task's sets: *_x uint8 (N, P), the pixels in reading order; *_y int32 (N,).
ImageSets = collections.namedtuple("ImageSets", "train_x train_y val_x val_y test_x test_y")


def _read(path, whole: bool):
  """(shape, dtype, data) of an IDX file; `whole` False: data None, checked by size alone."""
  with open(path, "rb") as raw:  # OSError: no such file, a folder
    compressed = raw.read(2) == b"\x1f\x8b"
    raw.seek(0)
    f = gzip.GzipFile(fileobj=raw) if compressed else raw
    try:
      magic = f.read(4)
      why = ("truncated" if len(magic) < 4 else "expected 00 00, a data type code, the number "
             "of dimensions" if magic[:2] != b"\0\0" else "0 dimensions" if not magic[3] else
             None if magic[2] in _IDX_DTYPES else f"unknown IDX data type 0x{magic[2]:02X}")
      if why:
        raise ValueError(f"{path}: not an IDX file: bad magic number 0x{magic.hex()} ({why}).")
      ndim, dtype = magic[3], _IDX_DTYPES[magic[2]]
      if len(header := f.read(4 * ndim)) < 4 * ndim:
        raise ValueError(f"{path}: truncated IDX file: {len(header)} of the {4 * ndim} header "
                         f"bytes of its {ndim} dimensions.")
      shape = struct.unpack(f">{ndim}I", header)
      want = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
      data = f.read() if whole else None  # to the end: a gzip stream's CRC is checked
      if whole:
        size = len(data)
      elif compressed:  # gzip's trailer: the uncompressed size mod 2³²
        raw.seek(-4, os.SEEK_END)
        size, want = (struct.unpack("<I", raw.read(4))[0] - 4 - 4 * ndim) % 2**32, want % 2**32
      else:
        size = os.fstat(raw.fileno()).st_size - 4 - 4 * ndim
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:  # EOFError: a stream ending early
      reason = str(e).splitlines()[0] if str(e) else type(e).__name__
      raise ValueError(f"{path}: corrupt or truncated gzip data ({reason}).") from e
  if size != want:
    extra = f" ({size - want} trailing bytes)" if size > want else ""
    raise ValueError(f"{path}: truncated or corrupt IDX file{extra}: {size} data bytes"
                     f"{' uncompressed' if compressed else ''}, its dimensions {shape} "
                     f"({dtype.name}) need {want}.")
  return shape, dtype, data


def read_idx(path: str | os.PathLike) -> np.ndarray:
  """One IDX file (gzip told by its first bytes) as a writable native-order array. Raises
  OSError: no file; ValueError: not IDX, truncated or corrupt (one line, the path)."""
  shape, dtype, data = _read(os.fspath(path), whole=True)
  return np.frombuffer(data, dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _find(folder: str) -> list[str | None]:
  # The four files' paths (None: missing), .gz first: a copy beside it may be half-extracted.
  paths = ([os.path.join(folder, n) for n in (name + ".gz", name)] for name in IDX_FILE_NAMES)
  return [next((p for p in pair if os.path.isfile(p)), None) for pair in paths]


def check_dataset_files(folder: str | os.PathLike) -> tuple[str, str, str, str]:
  """A folder's four IDX files (.gz first), checked by headers and sizes. Raises OSError: a
  missing folder or file (how to get them); ValueError: bad files, or ones that differ."""
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


def image_counts(folder: str | os.PathLike) -> tuple[int, int, int]:
  """(training images, test images, pixels per image) of a folder's IDX files, from their
  headers. Raises as `check_dataset_files`."""
  paths = check_dataset_files(folder)
  (num_train, height, width), (num_test, *_) = (_read(paths[i], whole=False)[0] for i in (0, 2))
  return num_train, num_test, height * width


def load_image_sets(folder: str | os.PathLike, task: str, seed: int = _PERMUTATION_SEED,
                    num_validation: int = 5_000) -> ImageSets:
  """A folder's images as `ImageSets` of 'pixel' (row by row) or 'permuted' (RandomState(seed)
  order), the last `num_validation` training images held out. Raises as `check_dataset_files`."""
  if task not in ("pixel", "permuted"):
    raise ValueError(f"unknown image task {task!r}; expected one of ('pixel', 'permuted').")
  paths = check_dataset_files(folder)
  train_x, train_y, test_x, test_y = map(read_idx, paths)
  for path, labels in ((paths[1], train_y), (paths[3], test_y)):
    if (bad := (labels < 0) | (labels >= 10)).any():
      raise ValueError(f"{path}: {int(bad.sum())} labels outside 0..9 (min {labels.min()}, "
                       f"max {labels.max()}).")
  n, pixels = len(train_x), train_x[0].size
  if (isinstance(num_validation, bool) or not isinstance(num_validation, (int, np.integer))
      or not 0 < num_validation < n):
    raise ValueError(f"{os.fspath(folder)}: num_validation must be an integer in 1..{n - 1} "
                     f"(there are {n} training images); got {num_validation!r}.")
  order = (np.random.RandomState(seed).permutation(pixels) if task == "permuted"
           else np.arange(pixels))
  x, y, cut = train_x.reshape(n, -1)[:, order], train_y.astype(np.int32), n - num_validation
  return ImageSets(x[:cut], y[:cut], x[cut:], y[cut:],
                   test_x.reshape(len(test_x), -1)[:, order], test_y.astype(np.int32))


def default_folder(dataset: str) -> str:
  """$LIE_UNITARY_DATA_DIR/<dataset>, else $XDG_CACHE_HOME (~/.cache)/lie_unitary/<dataset>."""
  root = os.environ.get(DATA_DIR_ENV, "") or os.path.join(
      os.environ.get("XDG_CACHE_HOME", "") or "~/.cache", "lie_unitary")
  return os.path.join(os.path.expanduser(root), dataset)


def resolve_data_dir(dataset: str, data_dir: str = "") -> str:
  """A dataset's folder: `data_dir` or `dataset` itself (a path) checked, else the first of its
  places that holds the files. Raises FileNotFoundError: none (where, how to get them)."""
  if data_dir or dataset not in DATASETS:
    folder = os.path.expanduser(data_dir or dataset)
    if not data_dir and not os.path.isdir(folder):
      raise FileNotFoundError(f"dataset {dataset!r}: neither one of {', '.join(DATASETS)} "
                              f"nor a folder; {_EXPECTED}.")
    check_dataset_files(folder)
    return folder
  places = [default_folder(dataset), *DATASETS[dataset].get("system_folders", ())]
  for folder in places:
    if os.path.isdir(folder) and all(_find(folder)):
      return folder
  raise FileNotFoundError(
      f"{dataset}: no folder with its four IDX files ({', '.join(IDX_FILE_NAMES)}, each may "
      f"end in .gz); looked in {' and '.join(places)}; download them there with "
      f"--config.download=True (or lie_unitary.experiments.rnn.download.download"
      f"({dataset!r})), pass data_dir, or set ${DATA_DIR_ENV}; or get them by hand: "
      f"{DATASETS[dataset]['how_to_get']}.")
