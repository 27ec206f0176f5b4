"""Config files load nothing heavy: ml_collections and their family's field table only."""

import os
import subprocess
import sys

import pytest

from lie_unitary.experiments import fields

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_HEAVY = ("jax", "jaxlib", "flax", "optax", "orbax", "numpy", "lie_unitary.nn")

_CHECK = """
import sys
{load}
heavy = sorted(m for m in sys.modules if m.split('.')[0] in {top} or m.startswith('lie_unitary.nn'))
print(repr(heavy))
"""


def _heavy_modules(load: str) -> list[str]:
  top = tuple(m for m in _HEAVY if "." not in m)
  code = _CHECK.format(load=load, top=top)
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, check=True)
  return eval(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_loading_every_config_file_imports_no_jax():
  files = sorted(f for f in os.listdir(fields.config_dir()) if f.endswith(".py")
                 and f != "__init__.py")
  load = ("from lie_unitary.experiments import fields\n"
          + "".join(f"fields.load_file({os.path.join(fields.config_dir(), f)!r})\n"
                    for f in files))
  assert _heavy_modules(load) == []


@pytest.mark.slow
@pytest.mark.parametrize("family", ["basis", "operators", "rnn"])
def test_loading_a_named_config_imports_no_jax(family):
  load = (f"from lie_unitary.experiments import fields\n"
          f"c = fields.load_config({family!r}, '{family}_smoke')\n"
          "assert c.variant == 'smoke'")
  assert _heavy_modules(load) == []


@pytest.mark.slow
def test_importing_the_package_imports_no_jax_until_used():
  assert _heavy_modules("import lie_unitary, lie_unitary.experiments") == []
  assert "jax" in _heavy_modules("import lie_unitary as lu; lu.unitary_from_lambdas")


@pytest.mark.parametrize("family", ["basis", "operators", "rnn"])
def test_every_named_config_validates(family):
  import importlib
  experiment = importlib.import_module(f"lie_unitary.experiments.{family}.experiment")
  table = importlib.import_module(f"lie_unitary.experiments.{family}.config")
  for name in table.NAMED_CONFIGS:
    config = fields.load_config(family, name)
    if config.get("task") in ("pixel", "permuted"):
      continue  # needs the dataset's files (tests/images_test.py)
    experiment.validate_config(config)


def test_an_unknown_named_config_names_the_choices():
  with pytest.raises(ValueError, match="unknown operators config 'tabel1'.*table1"):
    fields.config_path("operators", "tabel1")


def test_a_file_that_is_no_config_is_named_in_one_line(tmp_path):
  # ml_collections' error held the file's whole traceback.
  from absl import flags
  from ml_collections import config_flags

  from lie_unitary.experiments import launch
  flag_values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, flag_values=flag_values)
  parser = launch._NamedConfigs("rnn", flag_values["config"].parser)
  bad = tmp_path / "bad.py"
  bad.write_text("def get_config(:\n")
  with pytest.raises(ValueError, match=r"^cannot load config file .*bad\.py: [^\n]*$"):
    parser.parse(str(bad))


def test_the_light_budget_table_is_the_computed_one():
  from lie_unitary.experiments.rnn import config
  from lie_unitary.experiments.rnn import experiment
  for budget, sizes in config.BUDGETS.items():
    for model, n in sizes.items():
      assert n == experiment.budget_hidden_size(model, budget), (budget, model)


def test_tuple_overrides_of_unquoted_names_are_split():
  import ml_collections
  config = ml_collections.ConfigDict({"model": ("(orthogonal,)",), "T": (100, 200),
                                      "inner": {"model": ("gurnn, lstm",)}})
  from lie_unitary.experiments import launch
  launch._split_comma_lists(config)
  assert config.model == ("orthogonal",) and config.inner.model == ("gurnn", "lstm")
  assert config.T == (100, 200)


@pytest.mark.parametrize("field,value,expected", [
    ("num_updates", True, "an integer ≥ 1"),   # bool is an int to ml_collections
    ("num_updates", None, "an integer ≥ 1"),   # None is accepted by any typed field
    ("variant", 3, "a string"),
    ("download", None, "True or False"),
    ("rmsprop_decay", 1.0, "a finite number ≥ 0 and < 1"),
    ("lambda_optimizer", "adam", "one of ('sgd', 'rmsprop')"),
    ("seeds", (0, 0), "a non-empty tuple of integer ≥ 0, each once, e.g. (0, 1, 2)"),
    ("model", (), "a non-empty tuple from ('gurnn', "),
    ("lr_drops", (-1,), "a tuple of integer ≥ 0, e.g. (45000, 65000)"),
])
def test_validate_refuses_in_one_line_what_typing_lets_through(field, value, expected):
  import ml_collections

  from lie_unitary.experiments.rnn import config
  values = ml_collections.ConfigDict(config.defaults().to_dict(), type_safe=False)
  values[field] = value
  with pytest.raises(fields.ConfigError) as e:
    fields.validate(values, config.FIELDS)
  message = str(e.value)
  assert message.startswith(f"config.{field} = {value!r}: expected {expected}"), message
  assert "\n" not in message


def test_a_config_is_typed_by_its_defaults():
  from lie_unitary.experiments.rnn import config
  values = config.defaults()
  with pytest.raises(TypeError):
    values.num_updates = "many"
  values.num_update = 5  # the launcher locks the config; `validate` names such a field
  with pytest.raises(fields.ConfigError, match=r"no field 'num_update' \(did you mean "
                     r"'num_updates'\?\)"):
    fields.validate(values, config.FIELDS)
