"""Selecting the current units' records across launches."""

import os
import sys

import pytest

from lie_unitary.experiments import workdir as workdir_lib

import helpers


def _rec(uid, name, replicate=0, **fields):
  return dict(unit=uid, unit_name=name, kind="final", replicate=replicate, step=100,
              **fields)


def _workdir_with_rerun(tmp_path):
  """Launch 1: units a (seed 0) and b; launch 2 reruns a with seed 1 (a new id)."""
  wd = str(tmp_path)
  a, b = "n=3 lie_algebra epochs=1 lr=0.001", "n=3 arjovsky epochs=1 lr=0.001"
  helpers.write_launch(wd, 1, [(a, "a-old"), (b, "b-1")])
  workdir_lib.append_records(os.path.join(wd, "results.jsonl"), [
      _rec("a-old", a, r, seed=0, test_loss=9.0) for r in range(2)] + [
      _rec("b-1", b, r, seed=0, test_loss=1.0) for r in range(2)])
  helpers.write_launch(wd, 2, [(a, "a-new")])
  workdir_lib.append_records(os.path.join(wd, "results.jsonl"), [
      _rec("a-new", a, r, seed=1, test_loss=0.5) for r in range(2)])
  return wd, a, b


def test_the_latest_launch_of_a_name_wins(tmp_path):
  wd, a, b = _workdir_with_rerun(tmp_path)
  assert workdir_lib.current_unit_ids(wd) == {a: "a-new", b: "b-1"}
  assert workdir_lib.superseded_units(wd) == [(a, "a-old")]
  recs = workdir_lib.load_results(wd, as_frame=False)
  assert sorted((r["unit"], r["replicate"]) for r in recs) == [
      ("a-new", 0), ("a-new", 1), ("b-1", 0), ("b-1", 1)]
  assert all(r["seed"] == 1 for r in recs if r["unit_name"] == a)
  every = workdir_lib.load_results(wd, current_only=False, as_frame=False)
  assert len(every) == 6


def test_a_later_launch_can_bring_back_an_earlier_id(tmp_path):
  wd, a, _ = _workdir_with_rerun(tmp_path)
  helpers.write_launch(wd, 3, [(a, "a-old")])  # e.g. the first seed run again: the same id
  assert workdir_lib.current_unit_ids(wd)[a] == "a-old"
  assert workdir_lib.superseded_units(wd) == [(a, "a-new")]
  assert {r["unit"] for r in workdir_lib.load_results(wd, as_frame=False)} == {"a-old", "b-1"}


def test_launches_of_different_models_are_all_current(tmp_path):
  wd = str(tmp_path)
  path = os.path.join(wd, "results.jsonl")
  helpers.write_launch(wd, 1, [("adding T=100 lstm", "lstm-1")], family="rnn")
  workdir_lib.append_records(path, [_rec("lstm-1", "adding T=100 lstm", model="lstm")])
  helpers.write_launch(wd, 2, [("adding T=100 gurnn_beta", "gb-1")], family="rnn")
  workdir_lib.append_records(path, [_rec("gb-1", "adding T=100 gurnn_beta", model="gurnn_beta")])
  assert workdir_lib.superseded_units(wd) == []
  assert sorted(r["model"] for r in workdir_lib.load_results(wd, as_frame=False)) == [
      "gurnn_beta", "lstm"]


def test_launch_order_is_the_file_name_order(tmp_path):
  wd = str(tmp_path)
  helpers.write_launch(wd, 10, [("u", "id-10")])
  helpers.write_launch(wd, 9, [("u", "id-9")])  # written second, but 0009 < 0010
  assert workdir_lib.current_unit_ids(wd) == {"u": "id-10"}
  assert [la["units"][0]["id"] for la in workdir_lib.read_launches(wd)] == ["id-9", "id-10"]


def test_without_launches_every_record_with_a_unit_counts(tmp_path):
  wd = str(tmp_path)
  workdir_lib.append_records(os.path.join(wd, "results.jsonl"), [
      _rec("x-1", "x"), _rec("x-2", "x"), {"kind": "final", "test_loss": 1.0}])
  assert workdir_lib.current_unit_ids(wd) == {} and workdir_lib.superseded_units(wd) == []
  assert [r["unit"] for r in workdir_lib.load_results(wd, as_frame=False)] == ["x-1", "x-2"]
  assert len(workdir_lib.load_results(wd, current_only=False, as_frame=False)) == 3


def test_errors_name_the_workdir(tmp_path):
  with pytest.raises(FileNotFoundError, match="nowhere"):
    workdir_lib.load_results(str(tmp_path / "nowhere"))
  with pytest.raises(FileNotFoundError, match=str(tmp_path)):
    workdir_lib.load_results(str(tmp_path))
  with pytest.raises(FileNotFoundError, match="curves.jsonl"):
    workdir_lib.load_results(str(tmp_path), "curves.jsonl")
  open(tmp_path / "results.jsonl", "w").close()
  with pytest.raises(ValueError, match=str(tmp_path)):
    workdir_lib.load_results(str(tmp_path))
  workdir_lib.append_records(tmp_path / "results.jsonl", [{"kind": "final", "seed": 0}])
  with pytest.raises(ValueError, match="'unit'"):  # records from before the unit vocabulary
    workdir_lib.load_results(str(tmp_path))
  helpers.write_launch(str(tmp_path), 1, [("u", "u-1")])
  with pytest.raises(ValueError, match="no current records"):
    workdir_lib.load_results(str(tmp_path))
  (tmp_path / "launches" / "0002-broken.json").write_text("{")
  with pytest.raises(ValueError, match="0002-broken.json"):
    workdir_lib.current_unit_ids(str(tmp_path))


def test_frame_or_list(tmp_path, monkeypatch):
  wd, _, _ = _workdir_with_rerun(tmp_path)
  monkeypatch.setitem(sys.modules, "pandas", None)  # pandas not installed
  assert isinstance(workdir_lib.load_results(wd), list)
  with pytest.raises(ImportError, match=r"pip install lie_unitary\[pandas\]"):
    workdir_lib.load_results(wd, as_frame=True)
  assert isinstance(workdir_lib.load_results(wd, as_frame=False), list)


def test_frame_with_pandas(tmp_path):
  pd = pytest.importorskip("pandas")
  wd, _, _ = _workdir_with_rerun(tmp_path)
  df = workdir_lib.load_results(wd)
  assert isinstance(df, pd.DataFrame) and len(df) == 4
  assert sorted(df["unit"].unique()) == ["a-new", "b-1"]
  assert isinstance(workdir_lib.load_results(wd, as_frame=True), pd.DataFrame)
  back = workdir_lib.as_records(df)
  assert back == workdir_lib.load_results(wd, as_frame=False)


def test_as_records_drops_the_cells_a_record_lacked():
  pd = pytest.importorskip("pandas")
  recs = [{"step": 0, "val_loss": 1.0}, {"step": 20, "val_loss": "nan", "train_loss": 0.5}]
  assert workdir_lib.as_records(pd.DataFrame.from_records(recs)) == recs
  assert workdir_lib.as_records(recs) == recs
