"""Deprecated: this module is now `lie_unitary.experiments.rnn.data`; import that instead."""

import warnings

from lie_unitary.experiments.rnn.data import *  # noqa: F401,F403
from lie_unitary.experiments.rnn.data import __all__  # noqa: F401

warnings.warn("lie_unitary.experiments.rnn.tasks is deprecated; use "
              "lie_unitary.experiments.rnn.data.", DeprecationWarning, stacklevel=2)
