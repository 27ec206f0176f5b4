"""lie_unitary: learning unitary matrices through the Lie algebra u(n).

Hyland & Rätsch, "Learning Unitary Operators with Help From u(n)", AAAI 2017.
"""

from lie_unitary._version import __version__
from lie_unitary.algebra import basis
from lie_unitary.algebra import change_basis
from lie_unitary.algebra import lambdas_from_original_order
from lie_unitary.algebra import lambdas_to_original_order
from lie_unitary.algebra import lambdas_to_skew_hermitian
from lie_unitary.algebra import lambdas_to_skew_symmetric
from lie_unitary.algebra import n_from_num_lambdas
from lie_unitary.algebra import skew_hermitian_to_lambdas
from lie_unitary.algebra import skew_symmetric_to_lambdas
from lie_unitary.composition import arjovsky_apply
from lie_unitary.composition import arjovsky_unitary
from lie_unitary.expm import choose_method
from lie_unitary.expm import expm_skew_hermitian
from lie_unitary.expm import expm_skew_symmetric
from lie_unitary.expm import orthogonal_from_lambdas
from lie_unitary.expm import unitary_from_lambdas
from lie_unitary.generators import GENERATORS
from lie_unitary.generators import random_arjovsky_params
from lie_unitary.generators import random_unitary
from lie_unitary.nn.diagnostics import IsometryReport
from lie_unitary.nn.diagnostics import isometry_report
from lie_unitary.nn.linear import OrthogonalLinear
from lie_unitary.nn.linear import UnitaryLinear
from lie_unitary.logm import lambdas_from_unitary
from lie_unitary.logm import log_unitary
from lie_unitary.optax_transforms import MatrixLayout
from lie_unitary.optax_transforms import entrywise_gradient_mask
from lie_unitary.optax_transforms import polar_projection
from lie_unitary.parametrizations import PARAMETRIZATIONS
from lie_unitary.parametrizations import Parametrization
from lie_unitary.parametrizations import apply_gradient_mask
from lie_unitary.parametrizations import get_parametrization
from lie_unitary.parametrizations import polar_unitary
from lie_unitary.stiefel import num_semi_orthogonal_params
from lie_unitary.stiefel import num_semi_unitary_params
from lie_unitary.stiefel import semi_orthogonal_from_lambdas
from lie_unitary.stiefel import semi_unitary_from_lambdas
from lie_unitary.special_unitary import n_from_num_su_lambdas
from lie_unitary.special_unitary import skew_hermitian_to_su_lambdas
from lie_unitary.special_unitary import special_unitary_from_lambdas
from lie_unitary.special_unitary import su_basis
from lie_unitary.special_unitary import su_lambdas_from_special_unitary
from lie_unitary.special_unitary import su_lambdas_to_skew_hermitian
from lie_unitary.nn.cells import GURNNCell
from lie_unitary.nn.sequence import SequenceModel
from lie_unitary.nn.cells import SimpleRNNCell
from lie_unitary.nn.cells import URNNCell
from lie_unitary.experiments.rnn.tasks import adding_batch
from lie_unitary.experiments.rnn.tasks import memory_batch
