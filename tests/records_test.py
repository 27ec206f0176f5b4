"""Crash-safe JSONL records and progress lines."""

import math

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


def test_progress_lines():
  lines = []
  p = records.Progress(3, printer=lines.append)
  p.skip("a")
  seconds = p.finish("b")
  p.finish("c")
  assert lines[0] == "[1/3] a: already done, skipped"
  assert lines[1].startswith("[2/3] b:") and "ETA" in lines[1]
  assert lines[2].startswith("[3/3] c:") and "ETA 0s" in lines[2]
  assert seconds >= 0 and not math.isnan(seconds)
