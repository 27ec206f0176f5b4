"""Downloads MNIST, Fashion-MNIST and KMNIST from their mirrors, md5-checked (no jax)."""

from __future__ import annotations

import hashlib
import http.client
import os
import shutil
import tempfile
from typing import Callable
from typing import Sequence
import urllib.request

from lie_unitary.experiments.rnn import images

__all__ = ["CHECKSUMS", "MIRRORS", "DownloadError", "download"]

# Mirrors in the order tried: the dataset's own site last where a faster copy exists.
MIRRORS = {
    "mnist": ("https://ossci-datasets.s3.amazonaws.com/mnist/",
              "https://storage.googleapis.com/cvdf-datasets/mnist/",
              "http://yann.lecun.com/exdb/mnist/"),
    "fashion_mnist": ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
                      "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/"
                      "master/data/fashion/"),
    "kmnist": ("https://codh.rois.ac.jp/kmnist/dataset/kmnist/",
               "http://codh.rois.ac.jp/kmnist/dataset/kmnist/"),
}
# The md5 of each gzipped file as its authors publish it.
CHECKSUMS = {
    "mnist": ("f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
              "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"),
    "fashion_mnist": ("8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
                      "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310"),
    "kmnist": ("bdb82020997e1d708af4cf47b453dcf7", "e144d726b3acfaa3e44228e80efcd344",
               "5c965bf0a639b31b8f53240b1b52f4d7", "7320c461ea6c1c855c0b718fb2a4b134"),
}  # in the order of images.IDX_FILE_NAMES


class DownloadError(OSError):
  """No mirror gave a file with the published checksum (offline, moved, or corrupt)."""


def _md5(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.file_digest(f, lambda: hashlib.md5(usedforsecurity=False)).hexdigest()


def _fetch(url: str, folder: str, name: str, md5: str, timeout: float) -> None:
  """url → folder/name, renamed into place only when its md5 is `md5` (else OSError)."""
  fd, partial = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder)
  try:
    with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as response:
      shutil.copyfileobj(response, out, 1 << 20)
      out.flush()
      os.fsync(out.fileno())
    if (got := _md5(partial)) != md5:
      raise OSError(f"md5 {got}, expected {md5}")
    os.replace(partial, os.path.join(folder, name))
  finally:
    if os.path.exists(partial):
      os.remove(partial)


def download(dataset: str, folder: str | os.PathLike | None = None, *,
             mirrors: Sequence[str] | None = None, checksums: Sequence[str] | None = None,
             timeout: float = 60.0, printer: Callable[[str], None] = print) -> str:
  """Fetches a dataset's four gzipped IDX files into `folder` (created; None: its
  `images.default_folder`) from the first of `mirrors` that gives each with its md5
  (`checksums` in `images.IDX_FILE_NAMES` order), keeping files already there; returns
  the folder. Raises ValueError: an unknown dataset; DownloadError: a file no mirror gave
  (one line: the mirrors tried, why each failed, where to put the files by hand)."""
  if dataset not in MIRRORS:
    raise ValueError(f"unknown dataset {dataset!r}; expected one of {sorted(MIRRORS)}.")
  folder = os.path.expanduser(os.fspath(folder or images.default_folder(dataset)))
  mirrors = tuple(mirrors or MIRRORS[dataset])
  os.makedirs(folder, exist_ok=True)
  for name, md5 in zip((n + ".gz" for n in images.IDX_FILE_NAMES),
                       checksums or CHECKSUMS[dataset]):
    path = os.path.join(folder, name)
    if (os.path.isfile(path) and _md5(path) == md5) or (
        not os.path.exists(path) and os.path.isfile(path[:-len(".gz")])):
      continue  # already here (an uncompressed copy: checked by its header and size below)
    failures = []
    for base in mirrors:
      url = base.rstrip("/") + "/" + name
      try:
        _fetch(url, folder, name, md5, timeout)
        printer(f"{dataset}: {name} from {url}")
        break
      except (OSError, http.client.HTTPException, ValueError) as e:
        failures.append(f"{url}: {getattr(e, 'reason', None) or e}")
    else:
      raise DownloadError(f"{dataset}: could not download {name} ({'; '.join(failures)}); "
                          f"offline? put the four files {', '.join(images.IDX_FILE_NAMES)} "
                          f"(.gz or not) in {folder} by hand.")
  images.check_dataset_files(folder)
  return folder

