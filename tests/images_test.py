"""Tests of the IDX reader and MNIST-family dataset folders, on files written here by hand."""

import ast
import gzip
import os
import struct

import numpy as np
import pytest

from lie_unitary.experiments.rnn import images

import helpers

TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS = images.IDX_FILE_NAMES

# IDX type code -> (struct format character, numpy dtype): the test's own writer.
_TYPES = {
    0x08: ("B", np.uint8),
    0x09: ("b", np.int8),
    0x0B: ("h", np.int16),
    0x0C: ("i", np.int32),
    0x0D: ("f", np.float32),
    0x0E: ("d", np.float64),
}


def _idx_bytes(values, code=0x08, shape=None):
  """IDX bytes packed with struct, independently of the module under test."""
  values = np.asarray(values)
  shape = values.shape if shape is None else shape
  fmt, _ = _TYPES[code]
  flat = values.ravel().tolist()
  return (struct.pack(">BBBB", 0, 0, code, len(shape)) + struct.pack(f">{len(shape)}I", *shape)
          + struct.pack(f">{len(flat)}{fmt}", *flat))


def _write(path, data, gz=False):
  with open(path, "wb") as f:
    f.write(gzip.compress(data) if gz else data)
  return str(path)


def _make_folder(folder, n_train=12, n_test=5, hw=(28, 28), gz=False, seed=0, skip=()):
  """A dataset folder of random images and labels 0..9; returns the arrays written."""
  rng = np.random.RandomState(seed)
  os.makedirs(folder, exist_ok=True)
  arrays = {
      TRAIN_IMAGES: rng.randint(0, 256, (n_train, *hw)).astype(np.uint8),
      TRAIN_LABELS: rng.randint(0, 10, n_train).astype(np.uint8),
      TEST_IMAGES: rng.randint(0, 256, (n_test, *hw)).astype(np.uint8),
      TEST_LABELS: rng.randint(0, 10, n_test).astype(np.uint8),
  }
  for name, values in arrays.items():
    if name not in skip:
      _write(os.path.join(folder, name + (".gz" if gz else "")), _idx_bytes(values), gz)
  return arrays


def _load(folder):
  """(train images, train labels, test images, test labels) of a folder, pixel order, the
  held-out validation image joined back."""
  s = images.load_image_sets(folder, "pixel", num_validation=1)
  return (np.concatenate([s.train_x, s.val_x]), np.concatenate([s.train_y, s.val_y]),
          s.test_x, s.test_y)


def _assert_one_line(excinfo, *parts):
  message = str(excinfo.value)
  assert "\n" not in message, message
  for part in parts:
    assert str(part) in message, message


# --- read_idx -----------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_images_and_labels_round_trip(tmp_path, gz):
  rng = np.random.RandomState(1)
  pixels = rng.randint(0, 256, (3, 28, 28)).astype(np.uint8)
  labels = np.array([7, 0, 9], np.uint8)
  got_pixels = images.read_idx(_write(tmp_path / "i", _idx_bytes(pixels), gz))
  got_labels = images.read_idx(_write(tmp_path / "l", _idx_bytes(labels), gz))
  assert got_pixels.shape == (3, 28, 28) and got_pixels.dtype == np.uint8
  assert got_labels.shape == (3,) and got_labels.dtype == np.uint8
  np.testing.assert_array_equal(got_pixels, pixels)
  np.testing.assert_array_equal(got_labels, labels)
  assert got_pixels.flags.writeable


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("code", sorted(_TYPES))
def test_read_idx_every_dtype_round_trips_in_native_order(tmp_path, code, gz):
  _, dtype = _TYPES[code]
  values = (np.arange(24).reshape(2, 3, 4) * (-1) ** np.arange(24).reshape(2, 3, 4))
  if dtype == np.uint8:
    values = np.abs(values)
  if np.issubdtype(dtype, np.floating):
    values = values * 1.5 + 0.25
  values = values.astype(dtype)
  got = images.read_idx(_write(tmp_path / "x", _idx_bytes(values, code), gz))
  assert got.dtype == dtype and got.dtype.isnative
  np.testing.assert_array_equal(got, values)


def test_read_idx_gzip_told_by_magic_bytes_not_name(tmp_path):
  values = np.arange(10, dtype=np.uint8)
  gzipped = _write(tmp_path / "no-suffix", _idx_bytes(values), gz=True)
  raw = _write(tmp_path / "raw.gz", _idx_bytes(values), gz=False)
  np.testing.assert_array_equal(images.read_idx(gzipped), values)
  np.testing.assert_array_equal(images.read_idx(raw), values)


def test_read_idx_missing_file(tmp_path):
  path = tmp_path / "absent-idx1-ubyte"
  with pytest.raises(FileNotFoundError) as e:
    images.read_idx(path)
  _assert_one_line(e, path)


@pytest.mark.parametrize("header, what", [
    (b"\x08\x03\x00\x00", "bad magic number"),          # first two bytes not 0
    (b"\x00\x01\x08\x01", "bad magic number"),
    (b"\x00\x00\x0a\x01", "unknown IDX data type 0x0A"),  # 0x0A is no IDX type
    (b"\x00\x00\x08\x00", "0 dimensions"),
])
@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_bad_magic(tmp_path, header, what, gz):
  path = _write(tmp_path / "bad", header + struct.pack(">I", 1) + b"\x00", gz)
  with pytest.raises(ValueError) as e:
    images.read_idx(path)
  _assert_one_line(e, path, what)


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("cut, what", [
    (1, "truncated"),     # one data byte short
    (60, "truncated"),    # no data at all
    (63, "truncated"),    # inside the header's dimensions
    (73, "truncated"),    # inside the magic number
    (76, "truncated"),    # empty file
])
def test_read_idx_truncated(tmp_path, cut, what, gz):
  data = _idx_bytes(np.ones((5, 3, 4), np.uint8))
  assert len(data) == 76  # 4 magic + 3 × 4 dims + 60 data
  path = _write(tmp_path / "short", data[:len(data) - cut], gz)
  with pytest.raises(ValueError) as e:
    images.read_idx(path)
  _assert_one_line(e, path, what)


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_trailing_bytes(tmp_path, gz):
  path = _write(tmp_path / "long", _idx_bytes(np.ones((2, 2), np.uint8)) + b"xyz", gz)
  with pytest.raises(ValueError) as e:
    images.read_idx(path)
  _assert_one_line(e, path, "3 trailing bytes")


def test_read_idx_truncated_gzip_stream(tmp_path):
  rng = np.random.RandomState(0)
  compressed = gzip.compress(_idx_bytes(rng.randint(0, 256, (50, 28, 28)).astype(np.uint8)))
  path = _write(tmp_path / "partial.gz", compressed[: len(compressed) // 2])
  with pytest.raises(ValueError) as e:
    images.read_idx(path)
  _assert_one_line(e, path, "gzip")


def test_read_idx_a_folder(tmp_path):
  with pytest.raises(IsADirectoryError) as e:
    images.read_idx(tmp_path)
  _assert_one_line(e, tmp_path)


# --- dataset folders ----------------------------------------------------------------------


@pytest.mark.parametrize("gz", [False, True])
def test_load_image_sets_round_trip(tmp_path, gz):
  written = _make_folder(tmp_path, gz=gz)
  train_x, train_y, test_x, test_y = _load(tmp_path)
  assert train_x.shape == (12, 784) and train_x.dtype == np.uint8
  assert test_x.shape == (5, 784) and test_x.dtype == np.uint8
  assert train_y.shape == (12,) and train_y.dtype == np.int32
  assert test_y.shape == (5,) and test_y.dtype == np.int32
  # Flattened row by row: pixel 28·r + c is row r, column c.
  np.testing.assert_array_equal(train_x, written[TRAIN_IMAGES].reshape(12, -1))
  np.testing.assert_array_equal(train_x[:, 28 * 2 + 5], written[TRAIN_IMAGES][:, 2, 5])
  np.testing.assert_array_equal(test_x, written[TEST_IMAGES].reshape(5, -1))
  np.testing.assert_array_equal(train_y, written[TRAIN_LABELS])
  np.testing.assert_array_equal(test_y, written[TEST_LABELS])


def test_load_image_sets_any_image_shape(tmp_path):
  written = _make_folder(tmp_path, hw=(5, 7))
  train_x, _, test_x, _ = _load(tmp_path)
  assert train_x.shape == (12, 35)
  np.testing.assert_array_equal(test_x, written[TEST_IMAGES].reshape(5, 35))


def test_gz_preferred_when_both_exist_and_mixed_accepted(tmp_path):
  _make_folder(tmp_path, seed=1, gz=False)
  gz_arrays = _make_folder(tmp_path, seed=2, gz=True, skip=(TEST_LABELS,))
  paths = images.check_dataset_files(tmp_path)
  assert [os.path.basename(p) for p in paths] == [
      "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
      "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte"]
  np.testing.assert_array_equal(_load(tmp_path)[0],
                                gz_arrays[TRAIN_IMAGES].reshape(12, -1))


def test_missing_file_lists_the_four_names_and_how_to_get_them(tmp_path):
  _make_folder(tmp_path, skip=(TEST_IMAGES,))
  for call in (images.check_dataset_files, _load):
    with pytest.raises(FileNotFoundError) as e:
      call(tmp_path)
    _assert_one_line(e, tmp_path, "missing t10k-images-idx3-ubyte;", *images.IDX_FILE_NAMES,
                     "apt-get install dataset-fashion-mnist", "MNIST: from its homepage")


def test_missing_folder(tmp_path):
  with pytest.raises(FileNotFoundError) as e:
    images.check_dataset_files(tmp_path / "nowhere")
  _assert_one_line(e, "nowhere: no such folder", *images.IDX_FILE_NAMES)


def test_image_and_label_counts_differ(tmp_path):
  _make_folder(tmp_path)
  _write(tmp_path / TEST_LABELS, _idx_bytes(np.zeros(4, np.uint8)))
  with pytest.raises(ValueError) as e:
    _load(tmp_path)
  _assert_one_line(e, "5 test images", "4 labels")


def test_labels_out_of_range(tmp_path):
  _make_folder(tmp_path)
  _write(tmp_path / TRAIN_LABELS, _idx_bytes(np.array([0, 10, 3] + [1] * 8 + [255],
                                                             np.uint8)))
  with pytest.raises(ValueError) as e:
    _load(tmp_path)
  _assert_one_line(e, TRAIN_LABELS, "2 labels outside 0..9", "max 255")


def test_train_and_test_image_shapes_differ(tmp_path):
  _make_folder(tmp_path)
  _write(tmp_path / TEST_IMAGES, _idx_bytes(np.zeros((5, 27, 29), np.uint8)))
  with pytest.raises(ValueError) as e:
    _load(tmp_path)
  _assert_one_line(e, "(28, 28)", "(27, 29)")


def test_images_must_be_uint8_stacks(tmp_path):
  _make_folder(tmp_path)
  _write(tmp_path / TRAIN_IMAGES, _idx_bytes(np.zeros((12, 784), np.uint8)))
  with pytest.raises(ValueError) as e:
    _load(tmp_path)
  _assert_one_line(e, "(N, H, W) uint8", "(12, 784)")


# --- resolve_data_dir ---------------------------------------------------------------------


@pytest.fixture
def places(tmp_path, monkeypatch):
  """An explicit folder, an env-var root with fashion_mnist/ and a fake Debian folder."""
  explicit, root, debian = tmp_path / "explicit", tmp_path / "root", tmp_path / "debian"
  _make_folder(explicit)
  _make_folder(root / "fashion_mnist")
  _make_folder(debian, gz=True)
  monkeypatch.setenv(images.DATA_DIR_ENV, str(root))
  monkeypatch.setitem(images.DATASETS["fashion_mnist"], "system_folders", [str(debian)])
  return explicit, root, debian


def test_resolve_explicit_dir_wins(places):
  explicit, _, _ = places
  assert images.resolve_data_dir("fashion_mnist", str(explicit)) == str(explicit)
  assert images.resolve_data_dir("mnist", str(explicit)) == str(explicit)


def test_resolve_explicit_dir_without_files_raises(places, tmp_path):
  (tmp_path / "empty").mkdir()
  with pytest.raises(FileNotFoundError) as e:
    images.resolve_data_dir("fashion_mnist", str(tmp_path / "empty"))
  _assert_one_line(e, "empty: missing", *images.IDX_FILE_NAMES)


def test_resolve_env_var_beats_debian(places):
  _, root, _ = places
  assert images.resolve_data_dir("fashion_mnist") == str(root / "fashion_mnist")


def test_resolve_debian_when_env_var_unset_or_lacks_the_dataset(places, monkeypatch, tmp_path):
  _, _, debian = places
  monkeypatch.setenv(images.DATA_DIR_ENV, str(tmp_path / "other-root"))
  assert images.resolve_data_dir("fashion_mnist") == str(debian)
  monkeypatch.delenv(images.DATA_DIR_ENV)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  assert images.resolve_data_dir("fashion_mnist") == str(debian)
  # The download folder without $LIE_UNITARY_DATA_DIR: the cache's, before Debian's.
  _make_folder(tmp_path / "cache" / "lie_unitary" / "fashion_mnist")
  assert images.resolve_data_dir("fashion_mnist") == str(
      tmp_path / "cache" / "lie_unitary" / "fashion_mnist")


def test_resolve_env_var_sub_folder_per_dataset(places):
  _, root, _ = places
  _make_folder(root / "mnist")
  assert images.resolve_data_dir("mnist") == str(root / "mnist")
  # Files directly in the root are not taken for every dataset.
  _make_folder(root)
  with pytest.raises(FileNotFoundError):
    images.resolve_data_dir("kmnist")


def test_resolve_nothing_found(places, monkeypatch, tmp_path):
  monkeypatch.setitem(images.DATASETS["fashion_mnist"], "system_folders",
                      [str(tmp_path / "no-debian")])
  monkeypatch.delenv(images.DATA_DIR_ENV)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  with pytest.raises(FileNotFoundError) as e:
    images.resolve_data_dir("fashion_mnist")
  _assert_one_line(e, "fashion_mnist:", tmp_path / "cache" / "lie_unitary" / "fashion_mnist",
                   "no-debian", *images.IDX_FILE_NAMES, "apt-get install dataset-fashion-mnist",
                   "--config.download=True", "LIE_UNITARY_DATA_DIR")
  with pytest.raises(FileNotFoundError) as e:
    images.resolve_data_dir("mnist")  # no Debian package for MNIST: not looked for
  _assert_one_line(e, "mnist:", "homepage")
  assert "no-debian" not in str(e.value)


def test_resolve_a_folder_path(places, tmp_path):
  explicit, _, _ = places
  assert images.resolve_data_dir(str(explicit)) == str(explicit)
  with pytest.raises(FileNotFoundError) as e:
    images.resolve_data_dir(str(tmp_path / "not-a-dataset"))
  _assert_one_line(e, "not-a-dataset", "neither one of fashion_mnist, kmnist, mnist")


# --- the module itself and the real data --------------------------------------------------


def test_module_is_numpy_only():
  tree = ast.parse(open(images.__file__, encoding="utf-8").read())
  imported = {alias.name.split(".")[0] for node in ast.walk(tree)
              if isinstance(node, ast.Import) for alias in node.names}
  imported |= {node.module.split(".")[0] for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module}
  assert imported <= {"collections", "gzip", "json", "numpy", "os", "pathlib", "struct", "zlib"}


def test_real_fashion_mnist():
  folder = images.DATASETS["fashion_mnist"]["system_folders"][0]
  try:
    images.check_dataset_files(folder)
  except FileNotFoundError:
    pytest.skip(f"Fashion-MNIST not installed in {folder} (apt-get install "
                "dataset-fashion-mnist).")
  train_x, train_y, test_x, test_y = _load(folder)
  assert train_x.shape == (60000, 784) and test_x.shape == (10000, 784)
  # Fashion-MNIST is balanced: 6000 training and 1000 test images of each class.
  np.testing.assert_array_equal(np.bincount(train_y, minlength=10), [6000] * 10)
  np.testing.assert_array_equal(np.bincount(test_y, minlength=10), [1000] * 10)
  np.testing.assert_array_equal(train_y[:4], [9, 0, 0, 3])  # ankle boot first


def test_real_mnist():
  try:
    folder = images.resolve_data_dir("mnist")
  except FileNotFoundError:
    pytest.skip(f"MNIST not found in {images.default_folder('mnist')} (--config.download=True "
                "fetches it).")
  train_x, train_y, test_x, test_y = _load(folder)
  assert train_x.shape == (60000, 784) and test_x.shape == (10000, 784)
  # MNIST's published class counts and first labels.
  np.testing.assert_array_equal(np.bincount(train_y, minlength=10),
                                [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949])
  np.testing.assert_array_equal(np.bincount(test_y, minlength=10),
                                [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009])
  np.testing.assert_array_equal(train_y[:4], [5, 0, 4, 1])
  np.testing.assert_array_equal(test_y[:4], [7, 2, 1, 0])


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("cut", [1, 100])
def test_check_dataset_files_reads_headers_and_catches_a_truncated_file(tmp_path, gz, cut):
  _make_folder(tmp_path, gz=gz)
  assert images.check_dataset_files(tmp_path)[0].endswith(".gz" if gz else "ubyte")
  name = TRAIN_IMAGES + (".gz" if gz else "")
  data = open(tmp_path / name, "rb").read()
  if gz:  # a partial download: the gzip stream ends early
    data = data[:len(data) - cut - 8]
  else:
    data = data[:-cut]
  with open(tmp_path / name, "wb") as f:
    f.write(data)
  with pytest.raises(ValueError) as e:
    images.check_dataset_files(tmp_path)
  _assert_one_line(e, name)


def test_check_dataset_files_catches_counts_that_differ(tmp_path):
  _make_folder(tmp_path)
  _write(tmp_path / TEST_LABELS, _idx_bytes(np.zeros(4, np.uint8)))
  with pytest.raises(ValueError) as e:
    images.check_dataset_files(tmp_path)
  _assert_one_line(e, "5 test images but 4 labels")


@pytest.mark.slow
def test_a_truncated_file_is_one_line_exit_2_and_no_workdir(tmp_path):
  folder = tmp_path / "data"
  _make_folder(folder, hw=(4, 4))
  with open(folder / TEST_IMAGES, "r+b") as f:
    f.truncate(40)
  workdir = tmp_path / "w"
  out = helpers.launcher("rnn", "--config=permuted_mnist", f"--config.data_dir={folder}",
                         f"--workdir={workdir}", cwd=tmp_path)
  assert out.returncode == 2, out.stderr
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: config.data_dir = "), out.stderr
  assert "truncated or corrupt IDX file" in lines[0]
  assert not workdir.exists()
