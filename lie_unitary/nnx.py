"""Flax NNX layers: ``from lie_unitary import nnx as lnnx``; ``lnnx.UnitaryLinear(n, k, rngs=...)``.

The NNX versions of the linen layers in `lie_unitary.nn.linear` (the same maths,
`lie_unitary.nn.weights`); see `lie_unitary.nn.nnx_linear`.
"""

from lie_unitary.nn.nnx_linear import Base
from lie_unitary.nn.nnx_linear import OrthogonalLinear
from lie_unitary.nn.nnx_linear import UnitaryLinear

__all__ = ["Base", "OrthogonalLinear", "UnitaryLinear"]
