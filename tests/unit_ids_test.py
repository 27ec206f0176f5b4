"""Unit ids are stable: a workdir computed by an earlier release is reused, never recomputed.

The literal ids below were computed when these tests were written; every field that
enters a unit's identity (and every field that does not) must keep giving them. A
change that moves one invalidates every stored result of that kind: say so on purpose.
"""

import glob
import os

import pytest

from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.operators import config as operators_config
from lie_unitary.experiments.operators import experiment as operators
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import experiment as rnn

_RESULTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "results")


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


def _rnn_ids(variant, devices, monkeypatch, **changes):
  """{label: id} of an RNN config's units as a launch on `devices` devices resolves them."""
  config = rnn_config.get_config(variant)
  for k, v in changes.items():
    config[k] = v
  monkeypatch.setattr(rnn.jax, "device_count", lambda: devices)
  return {u.label: u.id for u in rnn.units(config)}


@pytest.mark.parametrize("variant,folder,devices,changes", [
    # The 70-epoch folders: today's configs with no layout flag on a 2-core machine.
    ("permuted_mnist", "psmnist_16k_70ep", 2, {}),
    ("pixel_mnist", "smnist_16k_70ep", 2, {}),
    # The 10-epoch folders: each batch whole on one device, the flag results/README.md gives.
    ("permuted_mnist", "psmnist_16k", 2, {"data_parallel": 1, "num_updates": 4290}),
    ("pixel_mnist", "smnist_16k", 2, {"data_parallel": 1, "num_updates": 4290}),
    ("pixel_mnist", "sfashion_16k", 2, {"data_parallel": 1, "num_updates": 4290,
                                        "dataset": "fashion_mnist"}),
    ("permuted_mnist", "psmnist_16k", 1, {"num_updates": 4290}),  # one device: the same
])
def test_the_published_folders_units_are_the_configs_units(variant, folder, devices, changes,
                                                            monkeypatch):
  have = workdir_lib.units(os.path.join(_RESULTS, folder))
  got = _rnn_ids(variant, devices, monkeypatch, **changes)
  # Every unit of the folder is one the command computes (sfashion_16k has seeds of its own
  # besides, and lacks some of the config's).
  assert set(have) <= set(got.values()) or folder == "sfashion_16k", (
      sorted(set(have) - set(got.values())))
  assert len(set(have) & set(got.values())) >= 7


@pytest.mark.parametrize("variant", ["memory", "adding"])
def test_the_paper_task_folders_units_are_the_documented_commands_units(variant, monkeypatch):
  # The config as it is (guRNN_β, 3 replicates), then Figure 3's models at one replicate.
  got = set(_rnn_ids(variant, 2, monkeypatch).values()) | set(_rnn_ids(
      variant, 2, monkeypatch, model=("gurnn", "lstm", "irnn", "tanh"),
      num_replicates=1).values())
  assert set(workdir_lib.units(os.path.join(_RESULTS, f"{variant}_T100"))) == got


def test_every_recorded_unit_id_is_its_name_and_fields_fingerprint():
  folders = [os.path.dirname(f) for f in glob.glob(os.path.join(_RESULTS, "**", "launches"),
                                                     recursive=True)]
  assert len(folders) >= 13
  for folder in folders:
    for uid, u in workdir_lib.units(folder).items():
      assert u.id == uid, (folder, uid)
