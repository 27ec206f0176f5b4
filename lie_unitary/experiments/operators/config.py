"""The operator-learning family's field table (paper §3, Tables 1-2, app. B).

`FIELDS` says what each field accepts and whether it enters a unit's identity (training
fields for trained units, refresh fields for refreshing approaches; a unit's own n,
approach, epochs, learning rate and basis scale stand in for the fields that list the
units). Defaults and meanings: `defaults.get_config()`.
"""

from __future__ import annotations

import ml_collections

from lie_unitary import generators
from lie_unitary import parametrizations
from lie_unitary import principal_branch
from lie_unitary.experiments import fields as F
from lie_unitary.experiments import launch
from lie_unitary.experiments import training
from lie_unitary.experiments.operators.defaults import NAMED_CONFIGS

__all__ = ["BASELINES", "BASIS_CHANGE_APPROACHES", "COMPLEX_APPROACHES", "FIELDS",
           "NAMED_CONFIGS", "REAL_APPROACHES", "REAL_GENERATORS", "get_config", "real_dtype"]

# What the family fits: a parametrization, or a baseline (`data.make_baselines`).
BASELINES = ("true", "rand", "lstsq")
COMPLEX_APPROACHES = tuple(n for n, p in parametrizations.PARAMETRIZATIONS.items()
                           if not p.is_orthogonal)
REAL_APPROACHES = tuple(n for n, p in parametrizations.PARAMETRIZATIONS.items()
                        if p.is_orthogonal)
# Generators of SO(n) targets (U(n) targets: `lie_unitary.GENERATORS`).
REAL_GENERATORS = ("haar", "lie")
# Approaches that accept appendix B's λ = λ̃ᵀ M: a refresh (if any) returns λ = λ̃ = 0.
BASIS_CHANGE_APPROACHES = ("lie_algebra", "lie_zero_init", "lie_rebased")


def _trained(config, unit) -> bool:
  return unit.approach != "baselines"


def _refreshes(config, unit) -> bool:
  return (_trained(config, unit)
          and parametrizations.get_parametrization(unit.approach).refresh is not None)


_POSITIVE = F.integer(1)
_NONNEGATIVE = F.number(0.0)

FIELDS = {
    "variant": F.Field(F.string(), identity=False),
    "field": F.Field(F.one_of(("complex", "real"))),
    "n_values": F.Field(F.tuple_of(F.integer(1), unique=True, example="(3, 6)"), identity=False),
    "approaches": F.Field(F.tuple_of(F.one_of(COMPLEX_APPROACHES + REAL_APPROACHES + BASELINES),
                                     unique=True), identity=False),
    "generators": F.Field(F.tuple_of(F.one_of(tuple(generators.GENERATORS) + REAL_GENERATORS))),
    "num_replicates": F.Field(_POSITIVE),
    "num_epochs": F.Field(F.pairs(F.integer(0), F.integer(1), "((0, 1), (8, 3))"), identity=False),
    "batch_size": F.Field(_POSITIVE, identity=_trained),
    "optimizer": F.Field(F.one_of(training.OPTIMIZERS), identity=_trained),
    "learning_rate": F.Field(F.number(positive=True), identity=False),
    "rmsprop_decay": F.Field(F.number(0.0, below=1.0), identity=_trained),
    "dtype": F.Field(F.one_of(("complex64", "complex128"))),
    "seed": F.Field(F.integer(0)),
    "num_train": F.Field(_POSITIVE),
    "num_val": F.Field(_POSITIVE),
    "num_test": F.Field(_POSITIVE),
    "val_every": F.Field(_POSITIVE, identity=_trained),
    "val_subsample": F.Field(_POSITIVE),
    "noise_std": F.Field(_NONNEGATIVE),
    "lie_target_std": F.Field(_NONNEGATIVE),
    "basis_scales": F.Field(F.tuple_of(_NONNEGATIVE), identity=False),
    "lr_divisors": F.Field(F.tuple_of(F.number(positive=True)), identity=False),
    "lr_schedule": F.Field(F.one_of(training.SCHEDULES), identity=_trained),
    "refresh_every": F.Field(F.integer(0), identity=_refreshes),
    "refresh_state": F.Field(F.one_of(principal_branch.REFRESH_STATES), identity=_refreshes),
}


def get_config(name: str = "table1") -> ml_collections.ConfigDict:
  """The config of a named experiment of ``configs/`` (`NAMED_CONFIGS`); ValueError for an
  unknown name."""
  return launch.load_config("operators", name)


def real_dtype(dtype: str) -> str:
  """The real dtype of a config's `dtype`: 'float64' for complex128, else 'float32'."""
  return "float64" if dtype == "complex128" else "float32"
