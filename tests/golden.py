"""What the golden tests share: the check, with tolerances measured across hosts and releases.

The values pin float32 arithmetic on CPU. XLA's CPU code rounds differently from one
host to another (vector widths, fused multiply-adds) and from one jax release to the
next, so the pins hold to a relative tolerance per metric, set at about ten times the
largest difference measured between

the host the values were recorded on (jax 0.10.2) and a second host of the same kind
(AMD EPYC, AVX-512) under jax/jaxlib 0.8.0 (the floor), 0.10.2 and 0.11.2 (on that
host the three releases agreed to within 1e-6 except for the RNNs):

  | metrics | largest relative difference | rtol |
  |---|---|---|
  | operators, complex and real approaches | 9.9e-7 | 1e-5 |
  | operators, appendix B's change of basis, after 50 steps and test | 3.6e-5 | 5e-4 |
  | RNNs, every model and recipe | 1.3e-5 (ruRNN after 50 updates) | 2e-4 |

A change of the training numbers on purpose moves them by far more (a learning rate,
an initialisation, a reordered key split: 1e-3 to 1); regenerate the pins then
(`python tests/golden_*_test.py` prints them). On GPU/TPU the pins are skipped:
other arithmetic (and other reductions) entirely.
"""

import numpy as np
import pytest


def require_cpu() -> None:
  """Skips the calling test off CPU (the pins are CPU float32 arithmetic)."""
  import jax
  if jax.default_backend() != "cpu":
    pytest.skip("golden values are CPU arithmetic")


def check(got: dict, expected: dict, rtol) -> None:
  """The same keys, and every value within `rtol` of the pinned one.

  Args:
    got, expected: {key: tuple of metrics}.
    rtol: one relative tolerance, or one per metric position.
  """
  assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
  for k in expected:
    tol = np.broadcast_to(np.asarray(rtol, np.float64), np.shape(expected[k]))
    np.testing.assert_array_less(np.abs(np.subtract(got[k], expected[k])),
                                 tol * np.abs(expected[k]) + 1e-30,
                                 err_msg=f"{k}: got {got[k]}, pinned {expected[k]}")


def print_values(name: str, fn, kinds) -> None:
  """Prints `name = {kind: {key: values}}` from fn(kind, workdir), to paste as pins."""
  import tempfile

  import jax
  jax.config.update("jax_disable_most_optimizations", True)
  with jax.default_matmul_precision("highest"):
    print(f"{name} = {{")
    for kind in kinds:
      got = fn(kind, tempfile.mkdtemp())
      print(f"    {kind!r}: {{")
      for k in sorted(got):
        print(f"        {k!r}: ({''.join(repr(float(v)) + ', ' for v in got[k])[:-1]}),")
      print("    },")
    print("}")
