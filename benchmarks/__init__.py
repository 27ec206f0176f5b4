"""Benchmarks of lie_unitary: `python -m benchmarks SUBJECT [flags]` (see __main__.py).

Sets OPENBLAS_NUM_THREADS=1 unless set, before jax loads: OpenBLAS's threads (jaxlib's CPU
eigh) fight XLA's on small machines (docs/cpu_notes.md).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
