"""A unit with records but no checkpoint (lost with its machine) is refused, so that no
unit's records mix two starts; `restart_lost_units` replaces its records and starts it
again from step 0; a finished unit is never touched."""

import collections
import contextlib
import glob
import json
import os
import shutil

import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary.experiments import fields
from lie_unitary.experiments import loop
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib
from lie_unitary.experiments.rnn import config as rnn_configs
from lie_unitary.experiments.rnn import experiment as rnn

import helpers

_UNIT = fields.Unit("u", {"seed": 0}, 10)
_MESSAGE = (f"unit u seed=0 ({_UNIT.id}) has 3 records but no checkpoint: rerun with "
            "--restart_lost_units to start it again from step 0, replacing its records.")


def _context(tmp_path, lines, restart=False):
  return runner.UnitContext(str(tmp_path), _UNIT, lines.append, loop.StopRequest(),
                            restart_lost_units=restart)


def _texts(folder):
  """{file name: text} of a workdir's record files."""
  return {name: (folder / name).read_text() for name in (workdir_lib.RESULTS,
                                                          workdir_lib.CURVES,
                                                          workdir_lib.FINISHED)
          if (folder / name).exists()}


def _write_records(folder, unit_id):
  """Two records of `unit_id` in results.jsonl and one in curves.jsonl, between another
  unit's, and that unit's finished line."""
  for name, kinds in ((workdir_lib.RESULTS, ("val", "final")), (workdir_lib.CURVES, ("curve",))):
    workdir_lib.append_records(folder / name, [{"unit": "other", "kind": "val", "step": 0}])
    workdir_lib.append_records(folder / name, [{"unit": unit_id, "kind": k, "step": 3}
                                               for k in kinds])
    workdir_lib.append_records(folder / name, [{"unit": "other", "kind": "val", "step": 5}])
  workdir_lib.append_records(folder / workdir_lib.FINISHED, [{"unit": "other", "step": 5}])


def test_removing_a_units_records_leaves_every_other_line_as_it_was(tmp_path):
  _write_records(tmp_path, _UNIT.id)
  before = _texts(tmp_path)
  assert workdir_lib.unit_records(tmp_path, _UNIT.id) == 3
  workdir_lib.remove_unit_records(tmp_path, _UNIT.id)
  assert workdir_lib.unit_records(tmp_path, _UNIT.id) == 0
  for name, text in _texts(tmp_path).items():
    assert text == "".join(line for line in before[name].splitlines(keepends=True)
                           if json.loads(line)["unit"] != _UNIT.id), name
  assert sorted(os.listdir(tmp_path)) == sorted(before)  # no temporary file left
  workdir_lib.append_records(tmp_path / workdir_lib.RESULTS, [{"unit": "x"}])  # appends go on
  assert workdir_lib.read(tmp_path)[-1] == {"unit": "x"}


def _task(seen):
  """A unit of 10 steps that writes no record; `seen` gets the steps of its calls."""
  fresh = {"x": jnp.zeros((replicas_lib.Replicas(1).padded, 3))}
  return loop.Task(lambda: (fresh, {}),
                   lambda state, history, step, num: (seen.append(step) or state, history),
                   lambda state, history, step: ([], history, ""), lambda *_: {}, 10,
                   call_seconds=None)


def _checkpoints(tmp_path):
  with contextlib.closing(loop.checkpoints(
      workdir_lib.path(tmp_path, "checkpoints", _UNIT.slug))) as manager:
    return list(manager.all_steps())


def test_a_unit_with_records_but_no_checkpoint_is_refused_then_restarted_on_request(tmp_path):
  _write_records(tmp_path, _UNIT.id)
  before, seen = _texts(tmp_path), []
  with pytest.raises(fields.ConfigError) as refused:
    loop.train_unit(_task(seen), _context(tmp_path, []), replicas_lib.Replicas(1))
  assert str(refused.value) == _MESSAGE
  assert _texts(tmp_path) == before and _checkpoints(tmp_path) == [] and seen == []
  lines = []
  loop.train_unit(_task(seen), _context(tmp_path, lines, restart=True), replicas_lib.Replicas(1))
  assert seen == [0]  # from step 0
  assert lines[:1] == ["u seed=0: no checkpoint: its 3 records removed, starting again from "
                   "step 0."]
  assert workdir_lib.unit_records(tmp_path, _UNIT.id) == 0
  assert workdir_lib.unit_records(tmp_path, "other") == 5


def test_a_unit_with_a_readable_checkpoint_resumes_its_records_untouched(tmp_path):
  replicas, seen = replicas_lib.Replicas(1), []
  ckpt = loop.checkpoints(workdir_lib.path(tmp_path, "checkpoints", _UNIT.slug))
  loop.save_checkpoint(ckpt, 4, {"x": np.ones((1, 3), np.float32)}, {
      "step": 4, "elapsed": 1.0, "history": {}, "code": workdir_lib.code_fingerprint()})
  ckpt.close()
  _write_records(tmp_path, _UNIT.id)
  before = _texts(tmp_path)
  loop.train_unit(_task(seen), _context(tmp_path, []), replicas)
  assert seen == [4]
  assert _texts(tmp_path) == before
  # With every checkpoint unreadable, no checkpoint is left: refused as above.
  for f in glob.glob(os.path.join(ckpt.directory, "*", "**", "d", "*"), recursive=True):
    with open(f, "r+b") as fh:
      fh.write(b"\0" * max(1, os.path.getsize(f)))
  with pytest.raises(fields.ConfigError, match="has 3 records but no checkpoint"):
    loop.train_unit(_task(seen), _context(tmp_path, []), replicas)
  assert _texts(tmp_path) == before


def _smoke(**changes):
  config = rnn_configs.get_config("rnn_smoke")
  config.model, config.num_updates, config.seeds = ("tanh",), 20, (0, 1)
  for k, v in changes.items():
    config[k] = v
  return config


def _keys(folder):
  return collections.Counter(workdir_lib.record_key(r) for r in workdir_lib.read(folder))


@pytest.mark.slow
def test_a_lost_unit_restarts_on_request_and_a_finished_one_is_untouched(tmp_path):
  config, quiet = _smoke(), lambda *_: None
  clean = tmp_path / "clean"  # never stopped: the records to expect
  runner.train_and_evaluate(rnn, config, str(clean), printer=quiet, handle_signals=False)
  lost = tmp_path / "lost"
  seed0, seed1 = rnn.units(config)
  runner.train_and_evaluate(rnn, _smoke(seeds=(0,)), str(lost), printer=quiet)  # finished
  stop = loop.StopRequest()
  stop.request("SIGINT")  # seed 1 stops after its first update: records of step 0
  assert runner.train_and_evaluate(rnn, _smoke(seeds=(1,)), str(lost), printer=quiet,
                                   stop=stop).stopped_by
  shutil.rmtree(lost / "checkpoints")  # both units' checkpoints lost with the machine
  workdir_lib.append_records(lost / workdir_lib.RESULTS, [{"unit": seed1.id, "step": 99}])
  before = (lost / workdir_lib.RESULTS).read_text()
  count = workdir_lib.unit_records(lost, seed1.id)
  with pytest.raises(runner.ConfigError, match=f"seed=1 .* has {count} records but no "
                     "checkpoint: rerun with --restart_lost_units"):
    runner.train_and_evaluate(rnn, config, str(lost), printer=quiet, handle_signals=False)
  assert (lost / workdir_lib.RESULTS).read_text() == before
  lines = []
  runner.train_and_evaluate(rnn, config, str(lost), printer=lines.append,
                            handle_signals=False, restart_lost_units=True)
  assert any("seed=0: already done, skipped" in line for line in lines), lines
  assert any(f"seed=1: no checkpoint: its {count} records removed" in line for line in lines)
  after = (lost / workdir_lib.RESULTS).read_text().splitlines(keepends=True)
  seed0_lines = [x for x in before.splitlines(keepends=True) if seed0.id in x]
  assert [x for x in after if seed0.id in x] == seed0_lines  # the finished unit's, as they were
  assert max(_keys(lost).values()) == 1 and _keys(lost) == _keys(clean)  # no step 99 left


@pytest.mark.slow
def test_the_launcher_names_the_choice_in_one_line(tmp_path):
  (unit,) = rnn.units(_smoke(seeds=(0,)))
  workdir_lib.append_records(tmp_path / "w" / workdir_lib.RESULTS,
                             [{"unit": unit.id, "kind": "val", "replicate": 0, "step": 99}])
  args = ("--config=rnn_smoke", "--config.model=tanh", "--config.num_updates=20",
          f"--workdir={tmp_path / 'w'}")
  out = helpers.launcher("rnn", *args, cwd=tmp_path)
  assert out.returncode == 2, out
  assert out.stderr.strip() == (
      f"error: unit adding T=10 tanh seed=0 ({unit.id}) has 1 record but no checkpoint: "
      "rerun with --restart_lost_units to start it again from step 0, replacing its "
      "records."), out.stderr
  out = helpers.launcher("rnn", *args, "--restart_lost_units", cwd=tmp_path)
  assert out.returncode == 0, out.stderr
  steps = {r["step"] for r in workdir_lib.read(tmp_path / "w") if r["unit"] == unit.id}
  assert steps == {0, 20}
