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
from lie_unitary.logm import lambdas_from_unitary
from lie_unitary.logm import log_unitary
from lie_unitary.nn.cells import GURNNCell
from lie_unitary.nn.cells import SimpleRNNCell
from lie_unitary.nn.cells import URNNCell
from lie_unitary.nn.diagnostics import IsometryReport
from lie_unitary.nn.diagnostics import isometry_report
from lie_unitary.nn.linear import OrthogonalLinear
from lie_unitary.nn.linear import UnitaryLinear
from lie_unitary.nn.sequence import SequenceModel
from lie_unitary.optax_transforms import MatrixLayout
from lie_unitary.optax_transforms import entrywise_gradient_mask
from lie_unitary.optax_transforms import polar_projection
from lie_unitary.parametrizations import PARAMETRIZATIONS
from lie_unitary.parametrizations import Parametrization
from lie_unitary.parametrizations import apply_gradient_mask
from lie_unitary.parametrizations import get_parametrization
from lie_unitary.parametrizations import polar_unitary
from lie_unitary.principal_branch import INIT_SCHEMES
from lie_unitary.principal_branch import SpectrumStats
from lie_unitary.principal_branch import init_lambdas
from lie_unitary.principal_branch import lambda_initializer
from lie_unitary.principal_branch import principal_lambdas
from lie_unitary.principal_branch import rebase
from lie_unitary.principal_branch import rebased_unitary
from lie_unitary.principal_branch import reset_optimizer_state
from lie_unitary.principal_branch import reunitarize
from lie_unitary.principal_branch import spectrum
from lie_unitary.principal_branch import spectrum_stats
from lie_unitary.principal_branch import wrap_phases
from lie_unitary.special_unitary import n_from_num_su_lambdas
from lie_unitary.special_unitary import skew_hermitian_to_su_lambdas
from lie_unitary.special_unitary import special_unitary_from_lambdas
from lie_unitary.special_unitary import su_basis
from lie_unitary.special_unitary import su_lambdas_from_special_unitary
from lie_unitary.special_unitary import su_lambdas_to_skew_hermitian
from lie_unitary.stiefel import num_semi_orthogonal_params
from lie_unitary.stiefel import num_semi_unitary_params
from lie_unitary.stiefel import semi_orthogonal_from_lambdas
from lie_unitary.stiefel import semi_unitary_from_lambdas

__all__ = [
    "GENERATORS",
    "GURNNCell",
    "INIT_SCHEMES",
    "IsometryReport",
    "MatrixLayout",
    "OrthogonalLinear",
    "PARAMETRIZATIONS",
    "Parametrization",
    "SequenceModel",
    "SimpleRNNCell",
    "SpectrumStats",
    "URNNCell",
    "UnitaryLinear",
    "__version__",
    "apply_gradient_mask",
    "arjovsky_apply",
    "arjovsky_unitary",
    "basis",
    "change_basis",
    "choose_method",
    "entrywise_gradient_mask",
    "expm_skew_hermitian",
    "expm_skew_symmetric",
    "get_parametrization",
    "init_lambdas",
    "isometry_report",
    "lambda_initializer",
    "lambdas_from_original_order",
    "lambdas_from_unitary",
    "lambdas_to_original_order",
    "lambdas_to_skew_hermitian",
    "lambdas_to_skew_symmetric",
    "log_unitary",
    "n_from_num_lambdas",
    "n_from_num_su_lambdas",
    "num_semi_orthogonal_params",
    "num_semi_unitary_params",
    "orthogonal_from_lambdas",
    "polar_projection",
    "polar_unitary",
    "principal_lambdas",
    "random_arjovsky_params",
    "random_unitary",
    "rebase",
    "rebased_unitary",
    "reset_optimizer_state",
    "reunitarize",
    "semi_orthogonal_from_lambdas",
    "semi_unitary_from_lambdas",
    "skew_hermitian_to_lambdas",
    "skew_hermitian_to_su_lambdas",
    "skew_symmetric_to_lambdas",
    "special_unitary_from_lambdas",
    "spectrum",
    "spectrum_stats",
    "su_basis",
    "su_lambdas_from_special_unitary",
    "su_lambdas_to_skew_hermitian",
    "unitary_from_lambdas",
    "wrap_phases",
]

# The copy and adding problems' batch generators moved to the experiment layer
# (`lie_unitary.experiments.rnn.data`); the core no longer imports it.
_MOVED = {"adding_batch": "lie_unitary.experiments.rnn.data",
          "memory_batch": "lie_unitary.experiments.rnn.data"}


def __getattr__(name):
  if name in _MOVED:
    import importlib
    import warnings
    warnings.warn(f"lie_unitary.{name} is deprecated; use {_MOVED[name]}.{name}.",
                  DeprecationWarning, stacklevel=2)
    return getattr(importlib.import_module(_MOVED[name]), name)
  raise AttributeError(f"module 'lie_unitary' has no attribute {name!r}")
