"""Tests of the dataset download against small IDX files served on 127.0.0.1 (no network)."""

import contextlib
import functools
import gzip
import hashlib
import http.server
import os
import shutil
import threading

import pytest

from lie_unitary.experiments import fields
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import download as download_lib
from lie_unitary.experiments.rnn import experiment as rnn
from lie_unitary.experiments.rnn import images

import idx_files

NAMES = [n + ".gz" for n in images.IDX_FILE_NAMES]


@contextlib.contextmanager
def serve(folder, truncate=()):
  """An HTTP server of `folder` on 127.0.0.1: (base URL, list of paths requested). Files
  named in `truncate` are cut short mid-transfer (a Content-Length larger than sent)."""
  requested = []

  class Handler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
      pass

    def do_GET(self):
      requested.append(self.path)
      name = self.path.rsplit("/", 1)[-1]
      if name in truncate:
        with open(os.path.join(folder, name), "rb") as f:
          body = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:len(body) // 2])
        self.wfile.flush()
        self.close_connection = True
        return
      super().do_GET()

  server = http.server.ThreadingHTTPServer(
      ("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  try:
    yield f"http://127.0.0.1:{server.server_address[1]}/", requested
  finally:
    server.shutdown()
    server.server_close()


def _gz_source(tmp_path):
  """A folder of four gzipped IDX files and their md5s (hashlib, in IDX_FILE_NAMES order)."""
  src = tmp_path / "src"
  idx_files.write_image_folder(src, n_train=32, n_test=8)
  for name in images.IDX_FILE_NAMES:  # the labels are written plain: gzip them
    plain = src / name
    if plain.exists():
      with open(plain, "rb") as f, gzip.open(str(plain) + ".gz", "wb") as g:
        g.write(f.read())
      plain.unlink()
  md5s = [hashlib.md5((src / n).read_bytes()).hexdigest() for n in NAMES]
  return src, md5s


def _mirrors(monkeypatch, dataset, mirrors, md5s=None):
  """Points `dataset`'s mirrors (and checksums) at the test's servers."""
  monkeypatch.setitem(images.DATASETS[dataset], "mirrors", list(mirrors))
  if md5s is not None:
    monkeypatch.setitem(images.DATASETS[dataset], "md5", list(md5s))


def test_download_fetches_checks_and_keeps(tmp_path, monkeypatch):
  src, md5s = _gz_source(tmp_path)
  out = tmp_path / "out"
  with serve(src) as (url, requested):
    _mirrors(monkeypatch, "mnist", [url], md5s)
    got = download_lib.download("mnist", out)
    assert got == str(out) and sorted(os.listdir(out)) == sorted(NAMES)
    for name in NAMES:
      assert (out / name).read_bytes() == (src / name).read_bytes()
    sets = images.load_image_sets(out, "pixel", num_validation=2)
    assert sets.train_x.shape == (30, 16) and sets.test_y.shape == (8,)
    count = len(requested)
    download_lib.download("mnist", out)  # all present
    assert len(requested) == count == 4


def test_a_bad_mirror_falls_through_to_the_next(tmp_path, monkeypatch):
  src, md5s = _gz_source(tmp_path)
  wrong = tmp_path / "wrong"
  shutil.copytree(src, wrong)
  (wrong / NAMES[0]).write_bytes(b"\x1f\x8b not the file")  # a checksum mismatch
  (wrong / NAMES[1]).unlink()  # a 404
  (wrong / NAMES[2]).unlink()  # the next mirror cuts this one short
  with serve(wrong) as (bad, _), serve(src, truncate={NAMES[2]}) as (cut, _), \
      serve(src) as (good, _):
    _mirrors(monkeypatch, "mnist", [bad, cut, good], md5s)
    download_lib.download("mnist", tmp_path / "out")
  for name in NAMES:
    assert (tmp_path / "out" / name).read_bytes() == (src / name).read_bytes()
  assert not [f for f in os.listdir(tmp_path / "out") if f.endswith(".partial")]


def test_every_mirror_failing_is_one_line_and_leaves_no_file(tmp_path, monkeypatch):
  src, md5s = _gz_source(tmp_path)
  with serve(src, truncate=set(NAMES)) as (cut, _):
    _mirrors(monkeypatch, "kmnist", [cut, "http://127.0.0.1:9/"], md5s)
    with pytest.raises(OSError) as e:
      download_lib.download("kmnist", tmp_path / "out")
  message = str(e.value)
  assert "\n" not in message and "kmnist" in message and cut in message
  assert "127.0.0.1:9" in message and "by hand" in message
  assert os.listdir(tmp_path / "out") == []  # nothing half-written is left as data


def test_the_published_checksums_and_an_unknown_dataset():
  for dataset in ("mnist", "fashion_mnist", "kmnist"):
    sums = images.DATASETS[dataset]["md5"]
    assert len(sums) == 4 and all(len(s) == 32 and int(s, 16) >= 0 for s in sums)
    assert len(set(sums)) == 4 and images.DATASETS[dataset]["mirrors"]
  with pytest.raises(ValueError, match="unknown dataset 'cifar'"):
    download_lib.download("cifar", "/nonexistent")


def test_default_folder(monkeypatch, tmp_path):
  monkeypatch.setenv(images.DATA_DIR_ENV, str(tmp_path / "data"))
  assert images.default_folder("mnist") == str(tmp_path / "data" / "mnist")
  monkeypatch.delenv(images.DATA_DIR_ENV)
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  assert images.default_folder("kmnist") == str(tmp_path / "cache" / "lie_unitary" / "kmnist")



def test_uncompressed_files_already_there_are_kept(tmp_path, monkeypatch):
  src, md5s = _gz_source(tmp_path)
  out = tmp_path / "out"
  out.mkdir()
  for name in images.IDX_FILE_NAMES:
    (out / name).write_bytes(gzip.decompress((src / (name + ".gz")).read_bytes()))
  with serve(src) as (url, requested):
    _mirrors(monkeypatch, "fashion_mnist", [url], md5s)
    download_lib.download("fashion_mnist", out)
  assert requested == [] and sorted(os.listdir(out)) == sorted(images.IDX_FILE_NAMES)


def test_the_launchers_download_field_fetches_a_missing_set_before_anything_else(
    tmp_path, monkeypatch):
  src, md5s = _gz_source(tmp_path)
  monkeypatch.setenv(images.DATA_DIR_ENV, str(tmp_path / "data"))
  c = rnn_config.get_config("permuted_mnist")
  c.dataset, c.T, c.num_validation, c.eval_batch_size, c.batch_size = "kmnist", (16,), 8, 8, 8
  with pytest.raises(fields.ConfigError, match="--config.download=True") as e:
    rnn.validate_config(c)
  assert "\n" not in str(e.value) and str(tmp_path / "data" / "kmnist") in str(e.value)
  with serve(src) as (url, requested):
    _mirrors(monkeypatch, "kmnist", [url], md5s)
    c.download = True
    rnn.validate_config(c)
    assert len(requested) == 4
    rnn.validate_config(c)  # found now: nothing fetched again
    assert len(requested) == 4
  assert sorted(os.listdir(tmp_path / "data" / "kmnist")) == sorted(NAMES)
  _mirrors(monkeypatch, "mnist", ["http://127.0.0.1:9/"])
  c.dataset = "mnist"
  with pytest.raises(fields.ConfigError, match="could not download") as e:
    rnn.validate_config(c)
  assert "\n" not in str(e.value) and "by hand" in str(e.value)
