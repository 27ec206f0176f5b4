"""What the golden tests share: the toolchain their values were recorded with, the check.

The values pin float32 arithmetic as compiled by one jax/jaxlib release on CPU: other
releases round differently (1e-6 to 4e-6 between jax 0.8.2 and 0.10.0, and a ReLU
network that takes another path), so under another release, or off CPU, the pinned
comparisons are skipped, naming the release they were recorded with.
"""

import numpy as np
import pytest

RTOL = 1e-6
GOLDEN_JAX = "0.10.2"  # the jax and jaxlib release the values were recorded with


def require_recorded_toolchain() -> None:
  """Skips the calling test unless this is jax/jaxlib GOLDEN_JAX on CPU."""
  import jax
  import jaxlib
  if jax.default_backend() != "cpu":
    pytest.skip("golden values are CPU arithmetic")
  if (jax.__version__, jaxlib.__version__) != (GOLDEN_JAX, GOLDEN_JAX):
    pytest.skip(f"golden values recorded with jax/jaxlib {GOLDEN_JAX}; this is "
                f"{jax.__version__}/{jaxlib.__version__} "
                "(regenerate: python tests/golden_*_test.py)")


def check(got: dict, expected: dict) -> None:
  """The same keys, and every value within RTOL of the pinned one."""
  assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
  for k in expected:
    np.testing.assert_allclose(got[k], expected[k], rtol=RTOL, err_msg=str(k))


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
