"""Crash-safe JSONL records and progress lines."""


import numpy as np

from lie_unitary.experiments import records


def test_append_read_and_resume_keys(tmp_path):
  path = tmp_path / "sub" / "results.jsonl"
  records.append_records(path, [{"n": 3, "approach": "lie", "loss": np.float32(0.5)},
                                {"n": 6, "approach": "lie", "loss": float("nan"),
                                 "curve": np.arange(3)}])
  with open(path, "a") as f:
    f.write('{"n": 8, "appro')  # a crash mid-line
  got = records.read_records(path)
  assert [r["n"] for r in got] == [3, 6]
  assert got[0]["loss"] == 0.5 and got[1]["loss"] == "nan" and got[1]["curve"] == [0, 1, 2]
  assert records.read_records(tmp_path / "missing.jsonl") == []


def test_progress_lines_and_a_cost_weighted_eta(monkeypatch):
  # A fake clock: the ETA weighs units by cost, so a quick cheap unit (a baseline)
  # does not set the pace of the costly ones.
  clock = [0.0]
  monkeypatch.setattr(records.time, "perf_counter", lambda: clock[0])
  lines = []
  p = records.Progress([1.0, 0.5, 10.0, 10.0], printer=lines.append)
  p.skip("a", 1.0)
  clock[0] = 1.0
  assert p.finish("baseline", 0.5) == 1.0
  clock[0] = 21.0
  p.finish("b", 10.0)
  clock[0] = 41.0
  p.finish("c", 10.0)
  assert lines[0] == "[1/4] a: already done, skipped"
  # 1 s for 0.5 cost: 2 s per unit of cost, 20 left.
  assert lines[1] == "[2/4] baseline: 1.0s (elapsed 1s, ETA 40s)"
  # 21 s for 10.5: 2 s per unit of cost, 10 left.
  assert lines[2] == "[3/4] b: 20.0s (elapsed 21s, ETA 20s)"
  assert lines[3] == "[4/4] c: 20.0s (elapsed 41s)"
