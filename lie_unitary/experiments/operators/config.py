"""The operator-learning family's fields (paper §3, Tables 1-2, app. B), one table. A unit's
identity: its settings and the fields whose rule holds (training fields when trained,
refresh fields when refreshing). Importing this module loads ml_collections only."""

import ml_collections

from lie_unitary.experiments import fields as F

# The experiments that ``--config=NAME`` knows: the files configs/NAME.py.
NAMED_CONFIGS = ("table1", "table1_rmsprop", "table2", "basis_change", "large", "orthogonal",
                 "operators_smoke")
# What the family fits: a parametrization, or a baseline (`data.make_baselines`).
BASELINES = ("true", "rand", "lstsq", "procrustes")
# Generators of SO(n) targets (U(n) targets: `lie_unitary.GENERATORS`).
REAL_GENERATORS = ("haar", "lie")
# Approaches that accept appendix B's λ = λ̃ᵀ M: a refresh (if any) returns λ = λ̃ = 0.
BASIS_CHANGE_APPROACHES = ("lie_algebra", "lie_zero_init", "lie_rebased")


def _trained(config, setting) -> bool:
  return setting.approach != "baselines"


def _refreshes(config, setting) -> bool:
  from lie_unitary import parametrizations
  return (_trained(config, setting)
          and parametrizations.get_parametrization(setting.approach).refresh is not None)


def _epochs(value) -> str | None:
  pair = lambda p: (isinstance(p, (tuple, list)) and len(p) == 2 and not F.integer(0)(p[0])
                    and not F.integer(1)(p[1]))
  ok = isinstance(value, (tuple, list)) and value and all(map(pair, value))
  return None if ok else "a non-empty tuple of pairs (n ≥ 0, epochs ≥ 1), e.g. ((0, 1), (8, 3))"


_POSITIVE, _NONNEGATIVE = F.integer(1), F.number(0.0)
_OPTIMIZERS = "lie_unitary.experiments.optimizers"

FIELDS = {
    "variant": F.Field("", "the experiment's name (recorded in the launch file only)",
                       F.string, identity=False),
    "field": F.Field("complex", "'complex': U(n) targets, complex x and noise; 'real': SO(n), "
                     "real", F.one_of(("complex", "real"))),
    "n_values": F.Field((6,), "matrix sizes n, units each",
                        F.tuple_of(F.integer(1), unique=True, example="(3, 6)"), identity=False),
    "approaches": F.Field(("true", "rand", "lstsq", "procrustes", "projection", "arjovsky",
                           "lie_algebra"), "the field's parametrizations and the `BASELINES` "
                          "(`data.make_baselines`)", F.tuple_of(F.string, unique=True),
                          identity=False),
    "generators": F.Field(("lie", "qr", "composition"), "target generators (`REAL_GENERATORS` "
                          "for SO(n)), replicate r's: generators[r % len]", F.tuple_of(F.string)),
    "seeds": F.Field((0,), "root seeds, units each: replicate r at n: fold_in(fold_in(key(seed), "
                     "n), r)", F.tuple_of(F.integer(0), unique=True, example="(0, 1)"),
                     identity=False),
    "num_replicates": F.Field(18, "replicates (target, data, init) per unit", _POSITIVE),
    "num_epochs": F.Field(((0, 1),), "(n, epochs) pairs, (0, e) for every n not listed; an "
                          "epoch: the num_train pairs in a fresh order", _epochs, identity=False),
    "batch_size": F.Field(20, "pairs per step", _POSITIVE, identity=_trained),
    "optimizer": F.Field("sgd", "'sgd' (as the paper ran it) or 'rmsprop' (no momentum)",
                         F.one_of(F.registry(_OPTIMIZERS, "OPTIMIZERS")), identity=_trained),
    "learning_rate": F.Field(1e-3, "step size; a unit's: learning_rate / d for d in "
                             "lr_divisors", F.number(positive=True), identity=False),
    "rmsprop_decay": F.Field(0.9, "RMSProp's decay of the mean square",
                             F.number(0.0, below=1.0), identity=_trained),
    "dtype": F.Field("complex64", "'complex64' or 'complex128' (float64, with x64 enabled); "
                     "field='real': the real dtype", F.one_of(("complex64", "complex128"))),
    "num_train": F.Field(1_000_000, "training pairs per replicate (the paper: 10⁶ = 50,000 × "
                         "20)", _POSITIVE),
    "num_val": F.Field(100_000, "validation pairs (all evaluated at the end)", _POSITIVE),
    "num_test": F.Field(100_000, "test pairs", _POSITIVE),
    "val_every": F.Field(250, "steps between validation points (the paper: 250); divides "
                         "num_train // batch_size", _POSITIVE, identity=_trained),
    "val_subsample": F.Field(10_000, "validation pairs of the curve (the first)", _POSITIVE),
    "noise_std": F.Field(0.01, "std of each real component of the noise ε", _NONNEGATIVE),
    "lie_target_std": F.Field(1.0, "std of the 'lie' generator's λ (1 in §3; 0.01 in app. B)",
                              _NONNEGATIVE),
    "basis_scales": F.Field((0.0,), "app. B: c of the change of basis M ~ U(-c, c) (n² × n²), "
                            "units each; 0: none", F.tuple_of(_NONNEGATIVE, unique=True),
                            identity=False),
    "lr_divisors": F.Field((1.0,), "app. B: a unit per learning rate learning_rate / d",
                           F.tuple_of(F.number(positive=True), unique=True), identity=False),
    "lr_schedule": F.Field("constant", "'constant' or 'cosine' (decays to 0 over the run)",
                           F.one_of(F.registry(_OPTIMIZERS, "SCHEDULES")), identity=_trained),
    "refresh_every": F.Field(100, "refreshing approaches: before each step s ≡ 0 (mod "
                             "refresh_every), s = 0 included; 0: never", F.integer(0),
                             identity=_refreshes),
    "refresh_state": F.Field("keep", "a refresh's optimizer moments: 'keep' or 'reset'",
                             F.one_of(F.registry("lie_unitary.principal_branch",
                                                 "REFRESH_STATES")), identity=_refreshes),
}


def defaults() -> ml_collections.ConfigDict:
  """Table 1's protocol at n = 6, one epoch: every field at its default (`FIELDS`)."""
  return F.defaults(FIELDS)


def get_config(name: str = "table1") -> ml_collections.ConfigDict:
  """The named config `name` (`NAMED_CONFIGS`); ValueError for another name."""
  return F.load_config("operators", name)


def real_dtype(dtype: str) -> str:
  """The real dtype of a config's `dtype`: 'float64' for complex128, else 'float32'."""
  return "float64" if dtype == "complex128" else "float32"
