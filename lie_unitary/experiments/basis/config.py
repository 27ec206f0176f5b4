"""The hidden-subalgebra family's fields, one table.

m operators U_i = expm(Σ_j c_ij G*_j) share k hidden generators G* of u(n), drawn per
replicate; each has its own few noisy pairs y = U_i x + ε (paper §3's data). A cell is
(n, k, m, pairs, subalgebra, coef_std); the sweep is a centre cell and, per field, the
cells that change that field alone (`cells`). A unit is one (cell, approach).
"""

from __future__ import annotations

import ml_collections

from lie_unitary.experiments import fields as F

__all__ = ["APPROACHES", "CELL_FIELDS", "FIELDS", "SUBALGEBRAS", "NAMED_CONFIGS", "TRAINED",
           "cells", "defaults", "get_config"]

NAMED_CONFIGS = ("basis", "basis_smoke")  # the files configs/NAME.py
# learned: M and every c_i trained; full: per-operator λ in the standard basis (n² each);
# random_fixed: a fixed random k-dim basis (learned's initial M), c_i trained; oracle:
# M = G*, c_i trained; procrustes: the least-squares unitary per operator, closed form.
APPROACHES = ("learned", "full", "random_fixed", "oracle", "procrustes")
TRAINED = ("learned", "full", "random_fixed", "oracle")
# general: a uniformly random k-dim subspace of u(n); commuting: a toroidal subalgebra.
SUBALGEBRAS = ("general", "commuting")
CELL_FIELDS = ("n", "k", "m", "pairs", "subalgebra", "coef_std")


# Identity rules: (config, approach) -> whether the field enters the unit's identity.
_trained = lambda c, a: a in TRAINED
_learned = lambda c, a: a == "learned"


def _sweeps(value) -> str | None:
  """(field, values) pairs, or ((fields...), (tuples of their values)) for fields set together."""
  def item(names, values):
    if isinstance(names, str):
      return names in CELL_FIELDS and not F.tuple_of(FIELDS[names].check, unique=True)(values)
    return (isinstance(names, (tuple, list)) and names and all(f in CELL_FIELDS for f in names)
            and isinstance(values, (tuple, list)) and values
            and all(isinstance(v, (tuple, list)) and len(v) == len(names)
                    and not any(FIELDS[f].check(x) for f, x in zip(names, v)) for v in values))

  if isinstance(value, (tuple, list)) and all(
      isinstance(i, (tuple, list)) and len(i) == 2 and item(*i) for i in value):
    return None
  return (f"a tuple of (field, values) pairs: field one of {CELL_FIELDS} and values a tuple "
          "of that field's values, or a tuple of fields and a tuple of their values' tuples, "
          "e.g. (('pairs', (1, 2)), (('n', 'm'), ((20, 64),)))")


FIELDS = {
    "variant": F.Field("", "the experiment's name (recorded in the launch file only)",
                       F.string, identity=False),
    "n": F.Field(6, "the centre cell's matrix size n", F.integer(2), identity=False),
    "k": F.Field(3, "the centre cell's number of hidden generators (≤ n² general, ≤ n "
                 "commuting)", F.integer(1), identity=False),
    "m": F.Field(16, "the centre cell's number of operators", F.integer(1), identity=False),
    "pairs": F.Field(2, "the centre cell's training pairs per operator", F.integer(1),
                     identity=False),
    "subalgebra": F.Field("general", "the centre cell's hidden subalgebra: 'general' (a random "
                    "k-dim subspace of u(n)) or 'commuting' (a toroidal subalgebra)",
                    F.one_of(SUBALGEBRAS), identity=False),
    "coef_std": F.Field(1.0, "the centre cell's std s of the hidden coefficients c_ij ~ "
                        "N(0, s²) (G*'s rows orthonormal in the standard basis of u(n))",
                        F.number(positive=True), identity=False),
    "sweeps": F.Field((("pairs", (1, 2, 4, 8, 32)), ("m", (1, 4, 16, 64))),
                      "the cells beside the centre: for each (field, values), the centre "
                      "with that field set to each value (several fields: set together)",
                      _sweeps, identity=False),
    "approaches": F.Field(APPROACHES, "what to fit, units each: " + ", ".join(APPROACHES),
                          F.tuple_of(F.one_of(APPROACHES), unique=True), identity=False),
    "seeds": F.Field((0,), "root seeds, units each: replicate r of a cell uses fold_in(key("
                     "seed), (n, k, subalgebra, r)), its first m operators and P pairs the "
                     "same for every m, P and approach",
                     F.tuple_of(F.integer(0), unique=True), identity=False),
    "num_replicates": F.Field(8, "replicates (G*, coefficients, data, init) per unit, one "
                              "vmapped program", F.integer(1)),
    "noise_std": F.Field(0.01, "std of each real component of the noise ε (paper §3)",
                         F.number(0.0)),
    "num_val": F.Field(32, "validation pairs per operator: they choose the learning rate "
                       "(never the test pairs)", F.integer(1)),
    "num_test": F.Field(256, "test pairs per operator", F.integer(1)),
    "num_steps": F.Field(3000, "full-batch optimizer steps (trained approaches)",
                         F.integer(1), identity=_trained),
    "learning_rates": F.Field((3e-3, 1e-2, 3e-2), "Adam's peak rates (cosine decay to 0), "
                              "trained in one program; a replicate keeps its best on validation",
                              F.tuple_of(F.number(positive=True), unique=True),
                              identity=_trained),
    "restarts": F.Field(4, "learned: random initial bases, each trained at every rate; the "
                        "replicate keeps the (start, rate) of least validation loss "
                        "(random_fixed uses the first start's basis)", F.integer(1),
                        identity=_learned),
    "dtype": F.Field("float32", "real dtype of parameters and data (float64 runs the unit "
                     "with x64 enabled)", F.one_of(("float32", "float64"))),
}


def defaults() -> ml_collections.ConfigDict:
  """Every field at its default (`FIELDS`)."""
  return F.defaults(FIELDS)


def get_config(name: str = "basis") -> ml_collections.ConfigDict:
  """The named config `name` (`NAMED_CONFIGS`); ValueError for another name."""
  return F.load_config("basis", name)


def cells(config) -> list[dict]:
  """The cells of a config, the centre first, then each sweep's in order, each once:
  dicts of `CELL_FIELDS`."""
  centre = {f: config[f] for f in CELL_FIELDS}
  out = [centre]
  for names, values in config.sweeps:
    for v in values:
      cell = dict(centre, **(dict(zip(names, v)) if isinstance(names, (tuple, list))
                             else {names: v}))
      if cell not in out:
        out.append(cell)
  return out
