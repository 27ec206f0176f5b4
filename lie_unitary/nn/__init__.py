"""Flax layers and recurrent cells built on the unitary and orthogonal maps."""

from lie_unitary.nn.linear import OrthogonalLinear
from lie_unitary.nn.linear import UnitaryLinear
from lie_unitary.nn.rnn import GURNNCell
from lie_unitary.nn.rnn import SequenceModel
from lie_unitary.nn.rnn import SimpleRNNCell
from lie_unitary.nn.rnn import URNNCell
from lie_unitary.nn.rnn import diagonal_phases_init
from lie_unitary.nn.rnn import elementwise_recurrence
from lie_unitary.nn.rnn import modrelu
