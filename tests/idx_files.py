"""Small MNIST-family IDX folders for the tests, written with struct (independently of
the reader under test)."""

import gzip
import os
import struct

import numpy as np

HW = (4, 4)  # 16 pixels: T = 16


def _idx(array, path, gz=True):
  """IDX bytes of a uint8 array, packed with struct (independently of the reader)."""
  body = (struct.pack(">BBBB", 0, 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I",
                                                                        *array.shape)
          + array.astype(np.uint8).tobytes())
  with (gzip.open if gz else open)(str(path) + (".gz" if gz else ""), "wb") as f:
    f.write(body)


def write_image_folder(folder, n_train=256, n_test=64, seed=0):
  """A learnable toy set: the label is the brightest of 10 pixel blocks."""
  rng = np.random.RandomState(seed)
  os.makedirs(folder, exist_ok=True)
  for prefix, n in (("train", n_train), ("t10k", n_test)):
    labels = rng.randint(0, 10, n)
    x = rng.randint(0, 60, (n, HW[0] * HW[1]))
    x[np.arange(n), labels] = 255
    _idx(x.reshape(n, *HW), os.path.join(folder, f"{prefix}-images-idx3-ubyte"))
    _idx(labels, os.path.join(folder, f"{prefix}-labels-idx1-ubyte"), gz=False)
  return str(folder)
