"""lie_unitary: learning unitary matrices through the Lie algebra u(n).

Hyland & Rätsch, "Learning Unitary Operators with Help From u(n)", AAAI 2017.

The public API (``lu.unitary_from_lambdas``, ``lu.GURNNCell``, ...) is loaded on first
use, so importing the package, or a config file of the experiments, loads no jax.
"""

import importlib

from lie_unitary._version import __version__  # noqa: F401

# Each public name and the module that defines it.
_API = {
    "apply_gradient_mask": "parametrizations",
    "arjovsky_apply": "composition",
    "arjovsky_unitary": "composition",
    "basis": "algebra",
    "basis_dimension": "learned_basis",
    "BASIS_INITS": "learned_basis",
    "change_basis": "algebra",
    "choose_method": "expm",
    "entrywise_gradient_mask": "optax_transforms",
    "expm_skew_hermitian": "expm",
    "expm_skew_symmetric": "expm",
    "GENERATORS": "generators",
    "get_parametrization": "parametrizations",
    "GURNNCell": "nn.cells",
    "init_basis": "learned_basis",
    "init_lambdas": "principal_branch",
    "INIT_SCHEMES": "principal_branch",
    "isometry_report": "nn.diagnostics",
    "IsometryReport": "nn.diagnostics",
    "lambda_initializer": "principal_branch",
    "lambdas_from_original_order": "algebra",
    "lambdas_from_unitary": "logm",
    "lambdas_to_original_order": "algebra",
    "lambdas_to_skew_hermitian": "algebra",
    "lambdas_to_skew_symmetric": "algebra",
    "LearnedBasisUnitaries": "nn.learned_basis",
    "log_unitary": "logm",
    "MatrixLayout": "optax_transforms",
    "n_from_num_lambdas": "algebra",
    "n_from_num_su_lambdas": "special_unitary",
    "num_semi_orthogonal_params": "stiefel",
    "num_semi_unitary_params": "stiefel",
    "orthogonal_from_basis": "learned_basis",
    "orthogonal_from_lambdas": "expm",
    "OrthogonalLinear": "nn.linear",
    "Parametrization": "parametrizations",
    "PARAMETRIZATIONS": "parametrizations",
    "polar_projection": "optax_transforms",
    "polar_unitary": "parametrizations",
    "principal_angles": "learned_basis",
    "principal_lambdas": "principal_branch",
    "procrustes_unitary": "learned_basis",
    "random_arjovsky_params": "generators",
    "random_basis": "learned_basis",
    "random_unitary": "generators",
    "rebase": "principal_branch",
    "rebased_unitary": "principal_branch",
    "reset_optimizer_state": "principal_branch",
    "reunitarize": "principal_branch",
    "semi_orthogonal_from_lambdas": "stiefel",
    "semi_unitary_from_lambdas": "stiefel",
    "SequenceModel": "nn.sequence",
    "SimpleRNNCell": "nn.cells",
    "skew_hermitian_to_lambdas": "algebra",
    "skew_hermitian_to_su_lambdas": "special_unitary",
    "skew_symmetric_to_lambdas": "algebra",
    "special_unitary_from_basis": "learned_basis",
    "special_unitary_from_lambdas": "special_unitary",
    "spectrum": "principal_branch",
    "spectrum_stats": "principal_branch",
    "SpectrumStats": "principal_branch",
    "standard_basis": "learned_basis",
    "su_basis": "special_unitary",
    "su_lambdas_from_special_unitary": "special_unitary",
    "su_lambdas_to_skew_hermitian": "special_unitary",
    "toroidal_basis": "learned_basis",
    "unitary_from_basis": "learned_basis",
    "unitary_from_lambdas": "expm",
    "UnitaryLinear": "nn.linear",
    "URNNCell": "nn.cells",
    "wrap_phases": "principal_branch",
}
__all__ = sorted([*_API, "__version__"])


def __getattr__(name: str):
  if name in _API:
    value = getattr(importlib.import_module(f"lie_unitary.{_API[name]}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value
  raise AttributeError(f"module 'lie_unitary' has no attribute {name!r}")


def __dir__() -> list[str]:
  return sorted(set(globals()) | set(_API))
