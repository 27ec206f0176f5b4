"""Deprecated: this module is now `lie_unitary.experiments.rnn.trainer`; import that instead."""

import warnings

from lie_unitary.experiments.rnn.trainer import *  # noqa: F401,F403
from lie_unitary.experiments.rnn.trainer import __all__  # noqa: F401

warnings.warn("lie_unitary.experiments.rnn.training is deprecated; use "
              "lie_unitary.experiments.rnn.trainer.", DeprecationWarning, stacklevel=2)
