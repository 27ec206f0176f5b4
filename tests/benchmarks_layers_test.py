"""`python -m benchmarks layers` end to end on a tiny shape: one row per case with its
phases and peak memory, and a case past its time limit reported as such (no timing is
asserted)."""

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def _run(tmp_path, *flags):
  out = tmp_path / "rows.json"
  subprocess.run([sys.executable, "-m", "benchmarks", "layers", "--shapes=12x3,3x12",
                  "--impls=ours", "--repeats=1", f"--json={out}", *flags],
                 check=True, capture_output=True, text=True, timeout=600)
  return json.loads(out.read_text())["rows"]


def test_each_case_reports_its_phases_and_peak_memory(tmp_path):
  rows = _run(tmp_path)
  assert [(r["shape"], r["impl"]) for r in rows] == [("12 -> 3", "ours"), ("3 -> 12", "ours")]
  for row in rows:
    for phase in ("init ms", "forward ms", "forward+grad ms"):
      assert isinstance(row[phase], float) and row[phase] > 0
    assert row["peak GiB"] >= row["rss after imports GiB"] > 0


def test_a_case_past_its_limit_says_so(tmp_path):
  rows = _run(tmp_path, "--limit_s=0.01")
  assert all(r["forward+grad ms"] == "> limit" and r["peak GiB"] is None for r in rows)
