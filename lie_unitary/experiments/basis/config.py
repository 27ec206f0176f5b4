"""The hidden-subalgebra family's fields, one table (jax-free). A cell: (n, k, m, pairs,
subalgebra, coef_std); a unit: one (cell, approach, seed); the cells: `cells`."""

from lie_unitary.experiments import fields as F

NAMED_CONFIGS = ("basis", "basis_smoke")  # the files configs/NAME.py
# learned: M and every c_i trained; full: each operator's λ (n²); random_fixed: M learned's
# first start, oracle: M = G*, c_i trained; procrustes: each least-squares unitary, closed form.
APPROACHES = ("learned", "full", "random_fixed", "oracle", "procrustes")
TRAINED = APPROACHES[:4]
SUBALGEBRAS = ("general", "commuting")  # a random k-dim subspace of u(n); a toroidal one
CELL_FIELDS = ("n", "k", "m", "pairs", "subalgebra", "coef_std")


def _sweeps(value) -> str | None:
  """A check: a tuple of (field, values) pairs, or of ((fields...), (value tuples)) pairs."""
  def sweep(names, values):
    if isinstance(names, str):  # one field: a tuple of its values
      names, values = (names,), [(v,) for v in values]
    return (isinstance(names, (tuple, list)) and names and all(f in CELL_FIELDS for f in names)
            and all(isinstance(v, (tuple, list)) and len(v) == len(names)
                    and not any(FIELDS[f].check(x) for f, x in zip(names, v)) for v in values))

  if isinstance(value, (tuple, list)) and all(
      isinstance(s, (tuple, list)) and len(s) == 2 and isinstance(s[1], (tuple, list)) and s[1]
      and len({repr(v) for v in s[1]}) == len(s[1]) and sweep(*s) for s in value):
    return None
  return (f"a tuple of (field, values) pairs, field one of {CELL_FIELDS} or a tuple of them "
          "set together, e.g. (('pairs', (1, 2)), (('n', 'm'), ((20, 64),)))")


_CENTRE = "the centre cell's "
_TRAINED = lambda config, approach: approach in TRAINED  # an identity rule
FIELDS = {
    "variant": F.Field("", "the experiment's name (launch file only)", F.string, identity=False),
    "n": F.Field(6, _CENTRE + "matrix size n", F.integer(2), identity=False),
    "k": F.Field(3, _CENTRE + "generators (≤ n², commuting ≤ n)", F.integer(1), identity=False),
    "m": F.Field(16, _CENTRE + "number of operators", F.integer(1), identity=False),
    "pairs": F.Field(2, _CENTRE + "training pairs per operator", F.integer(1), identity=False),
    "subalgebra": F.Field("general", _CENTRE + "hidden subalgebra", F.one_of(SUBALGEBRAS),
                          identity=False),
    "coef_std": F.Field(1.0, _CENTRE + "std s of the coefficients c_ij ~ N(0, s²) (G*'s rows "
                        "orthonormal)", F.number(positive=True), identity=False),
    "sweeps": F.Field((("pairs", (1, 2, 4, 8, 32)), ("m", (1, 4, 16, 64))), "the cells beside "
                      "the centre: per (field(s), values), the centre with the field(s) at each",
                      _sweeps, identity=False),
    "approaches": F.Field(APPROACHES, "what to fit, units each",
                          F.tuple_of(F.one_of(APPROACHES), unique=True), identity=False),
    "seeds": F.Field((0,), "root seeds, units each (keys: `experiment.make_task`)",
                     F.tuple_of(F.integer(0), unique=True), identity=False),
    "num_replicates": F.Field(8, "replicates per unit, one vmapped program", F.integer(1)),
    "noise_std": F.Field(0.01, "std of each real component of the noise ε", F.number(0.0)),
    "num_val": F.Field(32, "validation pairs per operator (they choose the rate)", F.integer(1)),
    "num_test": F.Field(256, "test pairs per operator", F.integer(1)),
    "num_steps": F.Field(3000, "full-batch Adam steps", F.integer(1), identity=_TRAINED),
    "learning_rates": F.Field((3e-3, 1e-2, 3e-2), "Adam's peak rates, cosine decay to 0; a "
                              "replicate keeps its best on validation", identity=_TRAINED,
                              check=F.tuple_of(F.number(positive=True), unique=True)),
    "restarts": F.Field(4, "learned's random initial bases, each at every rate (random_fixed: "
                        "the first)", F.integer(1), identity=lambda c, a: a == "learned"),
    "dtype": F.Field("float32", "real dtype (float64: with x64)", F.one_of(("float32", "float64"))),
}


def cells(config) -> list[dict]:
  """The config's cells (dicts of `CELL_FIELDS`), the centre first, then each sweep's, once."""
  centre = {f: config[f] for f in CELL_FIELDS}
  out = [centre]
  for names, values in config.sweeps:
    for v in values:
      cell = dict(centre, **dict(zip(names, v) if isinstance(names, (tuple, list)) else
                                 [(names, v)]))
      if cell not in out:
        out.append(cell)
  return out
