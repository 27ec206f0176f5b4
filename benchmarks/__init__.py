"""Benchmarks of lie_unitary: `python -m benchmarks SUBJECT [flags]` (see __main__.py).

Importing the package sets OPENBLAS_NUM_THREADS=1 unless it is set: jaxlib's CPU eigh
runs on OpenBLAS, whose thread pool fights XLA's on small machines (1.6-1.8x slower at
n = 128 on 2 cores). It must happen before jax, and so scipy, is imported.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
