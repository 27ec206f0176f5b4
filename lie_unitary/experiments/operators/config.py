r"""The operator-learning family's config: one table of fields (paper §3, Tables 1-2, app. B).

`FIELDS` lists every field once: its default, what it accepts (read off the
registries: `lie_unitary.PARAMETRIZATIONS`, `lie_unitary.GENERATORS`, the shared
optimizers), whether it enters a unit's identity, and what it means. `defaults()` is
the config a user starts from; the experiments of the paper and beyond are small files
in the repository's ``configs/`` folder (``configs/table1.py``, ``configs/large.py``,
...) that start from it, and `get_config(name)` loads one of them::

    python -m lie_unitary.experiments.operators --config=table1 --workdir=runs/table1
    python scripts/learn_unitary.py --config=configs/table1.py --workdir=runs/table1

Any field can be set from the command line, e.g. ``--config.n_values='(6,)'
--config.num_replicates=3``.

A unit is every replicate of one (n, approach, basis scale, learning rate); its
identity holds every field that changes its numbers (`FIELDS`' identity column): the
task's fields for every unit, the optimizer's for trained ones, `lr_schedule` when it
is not 'constant' and the refresh fields for approaches that refresh. Its own n,
approach, epochs, learning rate and basis scale enter too; the fields that only say
which units to run (n_values, approaches, basis_scales, lr_divisors) do not.
"""

from __future__ import annotations

import ml_collections

from lie_unitary import generators
from lie_unitary import parametrizations
from lie_unitary import principal_branch
from lie_unitary.experiments import config_files
from lie_unitary.experiments import fields as F
from lie_unitary.experiments import training

__all__ = ["BASELINES", "BASIS_CHANGE_APPROACHES", "COMPLEX_APPROACHES", "FIELDS",
           "NAMED_CONFIGS", "REAL_APPROACHES", "REAL_GENERATORS", "defaults", "get_config",
           "real_dtype"]

# What the family fits: a parametrization, or a baseline (the target itself, a fresh
# draw of its generator, least squares on the training pairs).
BASELINES = ("true", "rand", "lstsq")
COMPLEX_APPROACHES = tuple(n for n, p in parametrizations.PARAMETRIZATIONS.items()
                           if not p.is_orthogonal)
REAL_APPROACHES = tuple(n for n, p in parametrizations.PARAMETRIZATIONS.items()
                        if p.is_orthogonal)
# Generators of SO(n) targets (U(n) targets: `lie_unitary.GENERATORS`).
REAL_GENERATORS = ("haar", "lie")
# Approaches that accept appendix B's change of basis λ = λ̃ᵀ M: their refresh (if any)
# returns λ = 0, whose λ̃ is 0 for every M.
BASIS_CHANGE_APPROACHES = ("lie_algebra", "lie_zero_init", "lie_rebased")

# The experiments of ``configs/`` that `get_config` and ``--config=NAME`` know.
NAMED_CONFIGS = {"table1": "table1", "table1_rmsprop": "table1_rmsprop", "table2": "table2",
                 "basis_change": "basis_change", "large": "large",
                 "orthogonal": "orthogonal", "smoke": "operators_smoke"}


def _trained(config, unit) -> bool:
  return unit.approach != "baselines"


def _scheduled(config, unit) -> bool:
  return _trained(config, unit) and config.lr_schedule != "constant"


def _refreshes(config, unit) -> bool:
  return (_trained(config, unit)
          and parametrizations.get_parametrization(unit.approach).refresh is not None)


_POSITIVE = F.integer(1)
_NONNEGATIVE = F.number(0.0)

FIELDS = {
    "variant": F.Field(
        "", F.string(), "The experiment's name (recorded in the launch file; not used by "
        "the computation).", identity=False),
    "field": F.Field(
        "complex", F.one_of(("complex", "real")), "'complex': U(n) targets, complex x and "
        "noise. 'real': SO(n) targets, real x and noise."),
    "n_values": F.Field(
        (6,), F.tuple_of(F.integer(1), unique=True, example="(3, 6)"), "Matrix sizes n.",
        identity=False),
    "approaches": F.Field(
        ("true", "rand", "lstsq", "projection", "arjovsky", "lie_algebra"),
        F.tuple_of(F.one_of(COMPLEX_APPROACHES + REAL_APPROACHES + BASELINES), unique=True),
        "What to fit: parametrizations (`lie_unitary.PARAMETRIZATIONS`; those of the field) "
        "and baselines: true (the target), rand (another draw of the generator), lstsq "
        "(least squares on the training pairs, unconstrained).", identity=False),
    "generators": F.Field(
        ("lie", "qr", "composition"),
        F.tuple_of(F.one_of(tuple(generators.GENERATORS) + REAL_GENERATORS)),
        "Target generators, cycled over replicates (replicate r uses generators[r % len]): "
        f"{', '.join(generators.GENERATORS)} (complex); {', '.join(REAL_GENERATORS)} (real)."),
    "num_replicates": F.Field(
        18, _POSITIVE, "Independent replicates (target, data, init) per setting, as one "
        "vmapped program."),
    "num_epochs": F.Field(
        ((0, 1),), F.pairs(F.integer(0), F.integer(1), "((0, 1), (8, 3))"),
        "Epochs per n as (n, epochs) pairs; (0, e) is the default for every n not listed. "
        "Each epoch visits the num_train pairs in a fresh order.", identity=False),
    "batch_size": F.Field(20, _POSITIVE, "Pairs per step.", identity=_trained),
    "optimizer": F.Field(
        "sgd", F.one_of(training.OPTIMIZERS), "'sgd' (as the paper ran it) or 'rmsprop' "
        "(no momentum).", identity=_trained),
    "learning_rate": F.Field(
        1e-3, F.number(positive=True), "Step size (each unit's: learning_rate / d for d in "
        "lr_divisors).", identity=False),
    "rmsprop_decay": F.Field(
        0.9, F.number(0.0, below=1.0), "RMSProp's decay of the mean square.",
        identity=_trained),
    "dtype": F.Field(
        "complex64", F.one_of(("complex64", "complex128")), "'complex64' (float32 "
        "parameters) or 'complex128' (float64; the unit runs with x64 enabled). For "
        "field='real' the matching real dtype."),
    "seed": F.Field(
        0, F.integer(0), "Root seed: replicate r at size n uses fold_in(fold_in(key(seed), "
        "n), r), the same target and data for every approach."),
    "num_train": F.Field(1_000_000, _POSITIVE, "Training pairs per replicate (the paper: "
                         "10⁶ = 50,000 batches of 20)."),
    "num_val": F.Field(100_000, _POSITIVE, "Validation pairs (the whole set is evaluated "
                       "at the end)."),
    "num_test": F.Field(100_000, _POSITIVE, "Test pairs."),
    "val_every": F.Field(
        250, _POSITIVE, "Steps between validation points (the paper: 250); divides "
        "num_train // batch_size.", identity=_trained),
    "val_subsample": F.Field(10_000, _POSITIVE, "Validation pairs of the curve during "
                             "training (the first ones of the set)."),
    "noise_std": F.Field(0.01, _NONNEGATIVE, "Standard deviation of each real component "
                         "of the noise ε."),
    "lie_target_std": F.Field(1.0, _NONNEGATIVE, "Std of the target λ of the 'lie' "
                              "generator (1 in §3; 0.01 in appendix B)."),
    "basis_scales": F.Field(
        (0.0,), F.tuple_of(_NONNEGATIVE), "Appendix B: c of the change of basis M ~ "
        "U(-c, c) (n² × n²); 0 = standard basis. c > 0 needs approaches from "
        f"{BASIS_CHANGE_APPROACHES} (and baselines).", identity=False),
    "lr_divisors": F.Field(
        (1.0,), F.tuple_of(F.number(positive=True)), "Appendix B: one unit per learning "
        "rate learning_rate / d.", identity=False),
    "lr_schedule": F.Field(
        "constant", F.one_of(training.SCHEDULES), "'constant', or 'cosine': the rate "
        "decays to 0 over the run.", identity=_scheduled),
    "refresh_every": F.Field(
        100, F.integer(0), "Approaches that refresh their chart (lie_recentred, "
        "lie_rebased, lie_rebased_orthonormal): before every step s with s % "
        "refresh_every == 0, s = 0 included; 0 = never.", identity=_refreshes),
    "refresh_state": F.Field(
        "keep", F.one_of(principal_branch.REFRESH_STATES), "What a refresh does to the "
        "optimizer's moments: keep them or reset them (step counts, and so the schedule, "
        "are kept).", identity=_refreshes),
}


def defaults() -> ml_collections.ConfigDict:
  """The family's default config: Table 1's protocol at n = 6, one epoch (`FIELDS`)."""
  return F.defaults(FIELDS)


def get_config(name: str = "table1") -> ml_collections.ConfigDict:
  """The config of a named experiment of ``configs/`` (`NAMED_CONFIGS`).

  Raises:
    ValueError: an unknown name.
  """
  return config_files.load(NAMED_CONFIGS, name, "operators")


def real_dtype(dtype: str) -> str:
  """The real dtype of a config's `dtype`: 'float64' for complex128, else 'float32'."""
  return "float64" if dtype == "complex128" else "float32"
