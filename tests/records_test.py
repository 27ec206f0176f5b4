"""Crash-safe JSONL records, and the progress clock."""


import numpy as np

from lie_unitary.experiments import loop
from lie_unitary.experiments import workdir as workdir_lib


def test_append_read_and_resume_keys(tmp_path):
  path = tmp_path / "sub" / "results.jsonl"
  workdir_lib.append_records(path, [{"n": 3, "approach": "lie", "loss": np.float32(0.5)},
                                {"n": 6, "approach": "lie", "loss": float("nan"),
                                 "curve": np.arange(3)}])
  with open(path, "a") as f:
    f.write('{"n": 8, "appro')  # a crash mid-line
  got = workdir_lib.read(tmp_path / "sub")
  assert [r["n"] for r in got] == [3, 6]
  assert got[0]["loss"] == 0.5 and got[1]["loss"] == "nan" and got[1]["curve"] == [0, 1, 2]
  assert workdir_lib.read(tmp_path, "missing.jsonl") == []


def test_eta_and_formatter():
  assert loop.eta(0.0, 0.0, 100.0) == ""  # no rate yet
  assert loop.eta(20.0, 10.0, 90.0) == ", ETA 2m40s"  # 2 s per unit, 80 left
  assert loop.eta(20.0, 90.0, 90.0) == ""
  assert [loop.format_seconds(s) for s in (7, 185, 7260)] == ["7s", "3m05s", "2h01m00s"]


def test_the_runner_lines_and_a_cost_weighted_eta(tmp_path, monkeypatch):
  # A family whose units take a fake second per unit of cost: a skipped unit (already
  # finished) does not set the pace, and the ETA weighs the units left by their cost.
  import types

  from lie_unitary.experiments import fields
  from lie_unitary.experiments import runner
  now = [0.0]
  monkeypatch.setattr(runner.time, "perf_counter", lambda: now[0])
  units = [fields.Unit(name, {"name": name}, 1, cost) for name, cost in
           (("a", 5.0), ("b", 1.0), ("c", 2.0), ("d", 2.0))]
  workdir_lib.mark_finished(str(tmp_path), units[0], 1.0)

  def run_unit(config, unit, ctx):
    now[0] += unit.cost
  family = types.SimpleNamespace(NAME="fake", validate_config=lambda config: None,
                                 units=lambda config: units, run_unit=run_unit)
  lines = []
  runner.train_and_evaluate(family, {}, str(tmp_path), printer=lines.append,
                            handle_signals=False)
  assert lines[1:] == ["[1/4] a: already done, skipped",
                   "[2/4] b: 1.0s (elapsed 1s, ETA 4s)",
                   "[3/4] c: 2.0s (elapsed 3s, ETA 2s)",
                   "[4/4] d: 2.0s (elapsed 5s)"]


def test_every_family_implements_the_family_protocol():
  from lie_unitary.experiments import runner
  for name in runner.FAMILIES:
    family = runner.get_family(name)
    assert isinstance(family, runner.Family) and family.NAME == name
  assert not isinstance(object(), runner.Family)
