"""The benchmarks' shared timer: round-robin order, rows, ratios, the JSON (no timings
are asserted)."""

import json

from absl import flags
from absl.testing import flagsaver

from benchmarks import timing

_MARKED = []


def setup_module():
  if not flags.FLAGS.is_parsed():  # the timer reads its flags' values
    flags.FLAGS.mark_as_parsed()
    _MARKED.append(True)


def teardown_module():
  if _MARKED:  # leave absl's state as the other tests found it
    flags.FLAGS.unparse_flags()


@flagsaver.flagsaver(rounds=4, seconds=0.0)
def test_compare_alternates_the_order_and_counts_items():
  calls = []
  variants = {name: (lambda name=name: calls.append(name) or 10) for name in ("a", "b", "c")}
  samples = timing.compare(variants, say=lambda *a, **k: None)
  # Warm-up, then one call each per round (seconds=0), reversed every other round.
  assert calls == ["a", "b", "c"] + ["a", "b", "c", "c", "b", "a"] * 2
  assert {k: len(v) for k, v in samples.items()} == {"a": 4, "b": 4, "c": 4}


def test_rows_ratios_to_the_reference():
  rows = timing.rows({"n": 3}, {"x": [2.0, 1.0], "y": [4.0, 3.0]}, reference="y", per="steps")
  assert [(r["variant"], r["best_ms"], r["÷ y"], r["steps/s"]) for r in rows] == [
      ("x", 1000.0, 1 / 3, 1.0), ("y", 3000.0, 1.0, 1 / 3)]
  assert rows[0]["median_ms"] == 1500.0 and rows[0]["n"] == 3


def test_report_writes_rows_and_machine(tmp_path, capsys):
  path = tmp_path / "out.json"
  with flagsaver.flagsaver(json=str(path)):
    timing.report([{"variant": "x", "best_ms": 1.5}], note="a note", extra_field=7)
  out = json.loads(path.read_text())
  assert out["rows"] == [{"variant": "x", "best_ms": 1.5}] and out["extra_field"] == 7
  assert {"date", "command", "jax", "backend", "OPENBLAS_NUM_THREADS"} <= set(out)
  assert "| variant | best_ms |" in capsys.readouterr().out
