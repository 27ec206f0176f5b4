"""Downloads MNIST, Fashion-MNIST and KMNIST from their mirrors, md5-checked (no jax)."""

import hashlib
import http.client
import os
import shutil
import urllib.request

from lie_unitary.experiments.rnn import images


def _md5(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.file_digest(f, lambda: hashlib.md5(usedforsecurity=False)).hexdigest()


def download(dataset: str, folder: str | os.PathLike | None = None) -> str:
  """Fetches a dataset's missing files into `folder` (None: `images.default_folder`), returned.
  Raises ValueError: an unknown dataset; OSError: a file no mirror gave (each one's failure)."""
  if dataset not in images.DATASETS:
    raise ValueError(f"unknown dataset {dataset!r}; expected one of {sorted(images.DATASETS)}.")
  folder = os.path.expanduser(os.fspath(folder or images.default_folder(dataset)))
  os.makedirs(folder, exist_ok=True)
  for name, md5 in zip(images.IDX_FILE_NAMES, images.DATASETS[dataset]["md5"]):
    path = os.path.join(folder, name + ".gz")
    if (os.path.isfile(path) and _md5(path) == md5) or (
        not os.path.exists(path) and os.path.isfile(path[:-3])):
      continue  # already here (an uncompressed copy: checked by its header and size below)
    failures, partial = [], f"{path}.{os.getpid()}.partial"
    for url in (base.rstrip("/") + f"/{name}.gz" for base in images.DATASETS[dataset]["mirrors"]):
      try:  # into place only with the published md5
        with open(partial, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
          shutil.copyfileobj(response, out)
        if (got := _md5(partial)) != md5:
          raise OSError(f"md5 {got}, expected {md5}")
        os.replace(partial, path)
        print(f"{dataset}: {name}.gz from {url}")
        break
      except (OSError, http.client.HTTPException, ValueError) as e:
        failures.append(f"{url}: {getattr(e, 'reason', None) or e}")
      finally:
        if os.path.exists(partial):
          os.remove(partial)
    else:
      raise OSError(f"{dataset}: could not download {name}.gz ({'; '.join(failures)}); "
                    f"offline? put the four files {', '.join(images.IDX_FILE_NAMES)} (.gz or "
                    f"not) in {folder} by hand.")
  images.check_dataset_files(folder)
  return folder
