"""Unit ids are stable: a workdir computed by an earlier release is reused, never recomputed.

The literal ids below were computed when these tests were written; every field that
enters a unit's identity (and every field that does not) must keep giving them. A
change that moves one invalidates every stored result of that kind: say so on purpose.
"""

import pytest

from lie_unitary.experiments.operators import config as operators_config
from lie_unitary.experiments.operators import experiment as operators
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import experiment as rnn


def _ids(family, config):
  family.validate_config(config)
  return [u.id for u in family.units(config)]


def test_operators_unit_ids():
  ids = _ids(operators, operators_config.get_config("table1"))
  # The baselines units' ids hold their list of baselines: procrustes joined it.
  assert ids[:5] == ["n=3 baselines-a048e196269e", "n=3 projection epochs=1 lr=0.001-584f95c047fc",
                     "n=3 arjovsky epochs=1 lr=0.001-b26082d57df4",
                     "n=3 lie_algebra epochs=1 lr=0.001-b8f291da1053",
                     "n=6 baselines-4fbe293bbeed"]
  # A refreshing approach carries refresh_every and refresh_state.
  assert "n=32 lie_rebased epochs=1 lr=0.001-12631840107a" in _ids(
      operators, operators_config.get_config("large"))


@pytest.mark.parametrize("variant,model_fields,expected", [
    ("memory", {}, ["memory T=100 gurnn_beta-9b9c1a2cf279"]),
    ("copy_long", {}, ["memory T=1000 gurnn-a3ae53265def", "memory T=2000 gurnn-2442513ad715"]),
    # λ refresh fields enter λ models only.
    ("adding", {"model": ("gurnn", "lstm", "free"), "lambda_refresh": "rebase"},
     ["adding T=100 gurnn-65e6e2f393c9", "adding T=100 lstm-fb4dad034e63",
      "adding T=100 free-f69b681dd822"]),
])
def test_rnn_unit_ids(variant, model_fields, expected):
  config = rnn_config.get_config(variant)
  for k, v in model_fields.items():
    config[k] = v
  assert _ids(rnn, config) == expected
