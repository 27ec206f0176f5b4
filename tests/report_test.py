"""The shared report toolkit: the standard error's one definition, tables, bands, the
published rows shipped as data, the machines note."""

import importlib.resources
import json
import math

import numpy as np
import pytest

from lie_unitary.experiments import report


def test_the_standard_error_is_the_ddof_1_deviation_over_root_n():
  # 1, 2, 6: mean 3, sample variance ((−2)² + (−1)² + 3²) / 2 = 7, s.e. √(7 / 3).
  mean, se, n = report.mean_se([1, None, 2, 6.0])
  assert (mean, n) == (3.0, 3) and se == pytest.approx(math.sqrt(7 / 3), rel=1e-15)
  assert math.isnan(report.mean_se([4.0])[1]) and report.mean_se([])[2] == 0
  assert report.pm([1.0, 3.0]) == "2 ± 1"  # two values a apart: s.e. a / 2
  assert report.pm([0.25], "{:.2f}".format) == "0.25" and report.pm([None]) == "—"
  assert "ddof = 1" in report.SE


def test_a_table_has_a_header_a_rule_and_a_line_per_row():
  assert report.table(["a", "b"], [[1, "x"], [2.5, None]]) == [
      "| a | b |", "|---|---|", "| 1 | x |", "| 2.5 | None |", ""]


def test_a_band_is_the_mean_plus_or_minus_one_standard_error():
  from matplotlib.figure import Figure  # here: matplotlib's import slows every worker
  ax = Figure().subplots()
  values = [[1.0, 3.0], [2.0, 2.0]]  # two points, two runs each
  mean = report.se_band(ax, [0, 1], values, "C0", label="m")
  np.testing.assert_array_equal(mean, [2.0, 2.0])
  line, = ax.lines
  assert line.get_label() == "m"
  band, = ax.collections
  ys = band.get_paths()[0].vertices[:, 1]
  assert ys.min() == pytest.approx(1.0) and ys.max() == pytest.approx(3.0)  # 2 ± 1 at x = 0


def test_a_single_point_is_a_marker_with_its_standard_error_as_error_bar():
  from matplotlib.figure import Figure
  ax = Figure().subplots()
  mean = report.se_band(ax, [0.7], [[1.0, 3.0, 5.0]], "C0", label="one")
  np.testing.assert_array_equal(mean, [3.0])
  (marker, *_), = [c for c in ax.containers]
  np.testing.assert_allclose(marker.get_xydata(), [[0.7, 3.0]])
  assert marker.get_marker() == "o" and ax.containers[0].get_label() == "one"
  bars, = ax.containers[0][2]
  (_, lo), (_, hi) = bars.get_segments()[0]
  assert hi - lo == pytest.approx(2 * 2.0 / np.sqrt(3))  # ± the s.e.: std 2 over √3 runs


def test_the_published_rows_ship_with_the_package_with_their_sources():
  text = importlib.resources.files("lie_unitary.experiments").joinpath(
      "published.json").read_text("utf-8")
  assert set(json.loads(text)["tables"]) >= {"mnist", "operators_table1", "operators_table2"}
  info, rows = report.published("mnist")
  by = {(r["model"], r["params"]): r for r in rows}
  # The 69K row read from the copy of expRNN's table: hidden 360, 96.2 / 98.4.
  exprnn = by[("expRNN", "69K")]
  assert (exprnn["hidden"], exprnn["psmnist"], exprnn["smnist"]) == (360, 96.2, 98.4)
  assert exprnn["source"]["read_from_a_copy"] and "asRNN" in exprnn["source"]["where"]
  assert (by[("LSTM", "69K")]["hidden"], by[("LSTM", "69K")]["psmnist"]) == (128, 79.5)
  assert by[("asRNN", "137K")]["smnist"] == 99.3 and by[("asRNN", "16K")]["hidden"] == 122
  assert {p for _, p in by} == {"16K", "69K", "137K"}
  assert "70 epochs" in info["protocol"] and all(r["protocol"] for r in rows)
  # The paper's Table 1 at n = 20: lie_algebra 0.47 ± 0.03; "~" (no s.e.) for true.
  t1 = {(r["n"], r["approach"]): (r["mean"], r["se"])
        for r in report.published("operators_table1")[1]}
  assert t1[(20, "lie_algebra")] == (0.47, 0.03) and t1[(20, "true")] == (0.004, None)
  with pytest.raises(KeyError, match="operators_table1"):
    report.published("no_such_table")


def test_a_published_table_numbers_a_note_per_copy_and_other_protocol():
  lines = report.published_table("mnist")
  assert lines[0].startswith("Published, test accuracy (%)") and "70 epochs" in lines[0]
  assert lines[2] == "| model | hidden | params | smnist | psmnist | source |"
  rows = [line for line in lines if line.startswith("| asRNN | 122 |")]
  assert rows == ["| asRNN | 122 | 16K | 98.89 | 95.41 | asRNN (an orthogonal recurrence with "
                  "a learned saturation, 2023) [2] |"]
  notes = [line for line in lines if line.startswith("[")]
  assert [n[:18] for n in notes] == ["[1] Read from a co", "[2] Read from the "]
  assert "Protocol:" not in notes[0] and "Protocol: as its README gives it" in notes[1]
  # The paper's code's own runs: read from no copy, one protocol: no notes.
  assert not [line for line in report.published_table("original_runs") if line.startswith("[")]


def _launch(units, devices=2, platform="Linux-a", host="vm", **provenance):
  return {"units": [{"id": u} for u in units],
          "provenance": dict(host=host, platform=platform, backend="cpu",
                             devices=[f"cpu:{i}" for i in range(devices)], **provenance)}


def test_the_machines_note_names_what_differs_and_which_units():
  same = [_launch(["a"]), _launch(["b"])]
  assert report.machines_note(same, {"a", "b"}) == []
  other = [_launch(["a"]), _launch(["b"], devices=1), _launch(["c"], platform="Linux-b")]
  assert report.machines_note(other, {"a"}) == []  # one table's units only
  line, blank = report.machines_note(other, {"a", "b"})
  assert blank == "" and "2 machines or device layouts" in line
  assert "devices 2: a; devices 1: b" in line and "platform" not in line
  assert "names no CPU model" in line
  cpus = [_launch(["a"], cpu_model="Xeon"), _launch(["b"], cpu_model="EPYC")]
  line, _ = report.machines_note(cpus, {"a", "b"})
  assert "cpu_model Xeon: a; cpu_model EPYC: b" in line and "names no CPU" not in line
  # With a CPU model named, another host or kernel build is the same machine.
  boots = [_launch(["a"], cpu_model="Xeon"), _launch(["b"], cpu_model="Xeon", platform="Linux-b",
                                                      host="vm2")]
  assert report.machines_note(boots, {"a", "b"}) == []
  line, _ = report.machines_note(boots + [_launch(["c"])], {"a", "b", "c"})
  assert "2 machines" in line and "cpu_model Xeon" in line and "cpu_model ?" in line
