"""Deprecated: this module is now `data` (targets, pairs, losses, baselines) and
`trainer` (training) of `lie_unitary.experiments.operators`; import those instead."""

import warnings

from lie_unitary.experiments.operators.data import *  # noqa: F401,F403
from lie_unitary.experiments.operators.trainer import *  # noqa: F401,F403
from lie_unitary.experiments.operators.trainer import optimizer_for as make_optimizer  # noqa: F401

warnings.warn("lie_unitary.experiments.operators.task is deprecated; use "
              "lie_unitary.experiments.operators.data and .trainer.", DeprecationWarning,
              stacklevel=2)
