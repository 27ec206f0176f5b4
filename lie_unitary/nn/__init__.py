"""Flax layers and recurrent cells built on the unitary and orthogonal maps."""

from lie_unitary.nn.cells import GURNN_ACTIVATIONS
from lie_unitary.nn.cells import H0_INITS
from lie_unitary.nn.cells import GURNNCell
from lie_unitary.nn.cells import InputProjection
from lie_unitary.nn.cells import SimpleRNNCell
from lie_unitary.nn.cells import URNNCell
from lie_unitary.nn.cells import diagonal_phases_init
from lie_unitary.nn.diagnostics import IsometryReport
from lie_unitary.nn.diagnostics import isometry_report
from lie_unitary.nn.learned_basis import COEFFICIENTS_COLLECTION
from lie_unitary.nn.learned_basis import LearnedBasisUnitaries
from lie_unitary.nn.learned_basis import collection_labels
from lie_unitary.nn.linear import OrthogonalLinear
from lie_unitary.nn.linear import UnitaryLinear
from lie_unitary.nn.orthogonal_cell import ORTHOGONAL_INITS
from lie_unitary.nn.orthogonal_cell import OrthogonalRNNCell
from lie_unitary.nn.orthogonal_cell import block_rotation_init
from lie_unitary.nn.orthogonal_cell import gurnn_num_params
from lie_unitary.nn.orthogonal_cell import orthogonal_labels
from lie_unitary.nn.orthogonal_cell import orthogonal_rnn_num_params
from lie_unitary.nn.rebasing import rebase
from lie_unitary.nn.recurrence import choose_complex_product
from lie_unitary.nn.recurrence import elementwise_recurrence
from lie_unitary.nn.recurrence import modrelu
from lie_unitary.nn.recurrence import modrelu_recurrence
from lie_unitary.nn.recurrence import real_modrelu
from lie_unitary.nn.recurrence import real_modrelu_recurrence
from lie_unitary.nn.sequence import FastPathCell
from lie_unitary.nn.sequence import ScanningCell
from lie_unitary.nn.sequence import SequenceModel
from lie_unitary.nn.sequence import torch_linear_init
from lie_unitary.nn.weights import BASE_COLLECTION
from lie_unitary.nn.weights import num_orthogonal_weight_params
from lie_unitary.nn.weights import num_unitary_weight_params
from lie_unitary.nn.weights import orthogonal_weight
from lie_unitary.nn.weights import unitary_weight

__all__ = [
    "BASE_COLLECTION",
    "COEFFICIENTS_COLLECTION",
    "FastPathCell",
    "GURNNCell",
    "GURNN_ACTIVATIONS",
    "H0_INITS",
    "InputProjection",
    "IsometryReport",
    "LearnedBasisUnitaries",
    "ORTHOGONAL_INITS",
    "OrthogonalLinear",
    "OrthogonalRNNCell",
    "ScanningCell",
    "SequenceModel",
    "SimpleRNNCell",
    "URNNCell",
    "UnitaryLinear",
    "block_rotation_init",
    "choose_complex_product",
    "collection_labels",
    "diagonal_phases_init",
    "elementwise_recurrence",
    "gurnn_num_params",
    "isometry_report",
    "modrelu",
    "modrelu_recurrence",
    "num_orthogonal_weight_params",
    "num_unitary_weight_params",
    "orthogonal_labels",
    "orthogonal_rnn_num_params",
    "orthogonal_weight",
    "real_modrelu",
    "real_modrelu_recurrence",
    "rebase",
    "torch_linear_init",
    "unitary_weight",
]
