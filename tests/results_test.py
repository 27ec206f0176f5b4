"""Loading a workdir's records: every unit's (seeds never replace each other), a unit's
furthest "final" records, units by label."""

import os
import sys

import pytest

from lie_unitary.experiments import workdir as workdir_lib
from scripts import merge_workdirs

import helpers


def _rec(uid, name, replicate=0, step=100, kind="final", **values):
  return dict(unit=uid, unit_name=name, kind=kind, replicate=replicate, step=step, **values)


def _two_seeds(tmp_path):
  """Launch 1: unit a (seed 0) and b; launch 2: a with seed 1 (another id, the same name)."""
  wd, a, b = str(tmp_path), "n=3 lie_algebra epochs=1 lr=0.001", "n=3 arjovsky epochs=1 lr=0.001"
  helpers.write_launch(wd, 1, [(a, "a-0"), (b, "b-0")])
  helpers.write_launch(wd, 2, [(a, "a-1")])
  workdir_lib.append_records(os.path.join(wd, "results.jsonl"), [
      _rec(uid, name, r, seed=seed, test_loss=loss)
      for uid, name, seed, loss in (("a-0", a, 0, 9.0), ("b-0", b, 0, 1.0), ("a-1", a, 1, 0.5))
      for r in range(2)])
  return wd, a, b


def test_seeds_of_one_unit_name_never_replace_each_other(tmp_path):
  wd, a, _ = _two_seeds(tmp_path)
  recs = workdir_lib.load_results(wd, as_frame=False)
  assert sorted((r["unit"], r["replicate"]) for r in recs) == [
      ("a-0", 0), ("a-0", 1), ("a-1", 0), ("a-1", 1), ("b-0", 0), ("b-0", 1)]
  assert sorted(r["seed"] for r in recs if r["unit_name"] == a) == [0, 0, 1, 1]


def test_unit_names_are_labels_with_their_seeds(tmp_path):
  wd = str(tmp_path)
  helpers.write_launch(wd, 1, [("u", "u-0")], fields={"u-0": {"seed": 0, "x": 1}})
  helpers.write_launch(wd, 2, [("u", "u-1"), ("v", "v-1")],
                       fields={"u-1": {"seed": 1, "x": 1}, "v-1": {}})
  assert workdir_lib.unit_names(wd) == ["u seed=0", "u seed=1", "v"]
  units = workdir_lib.units(wd)
  assert list(units) == ["u-0", "u-1", "v-1"] and units["u-1"].fields["seed"] == 1


def test_a_unit_extended_keeps_the_final_records_of_its_furthest_step(tmp_path):
  wd = str(tmp_path)
  helpers.write_launch(wd, 1, [("u", "u-1")])
  workdir_lib.append_records(os.path.join(wd, "results.jsonl"), [
      _rec("u-1", "u", step=10, kind="val", val_loss=2.0),
      _rec("u-1", "u", step=10, val_loss=2.0),  # the final record at the first target
      _rec("u-1", "u", step=20, kind="val", val_loss=1.0),
      _rec("u-1", "u", step=20, val_loss=1.0)])  # ... and at the extended one
  recs = workdir_lib.load_results(wd, as_frame=False)
  assert [(r["kind"], r["step"]) for r in recs] == [("val", 10), ("val", 20), ("final", 20)]


def test_launch_order_is_the_file_name_order(tmp_path):
  wd = str(tmp_path)
  helpers.write_launch(wd, 10, [("u", "id-10")])
  helpers.write_launch(wd, 9, [("u", "id-9")])  # written second, but 0009 < 0010
  assert list(workdir_lib.units(wd)) == ["id-9", "id-10"]
  assert [la["units"][0]["id"] for la in workdir_lib.read_launches(wd)] == ["id-9", "id-10"]


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
  with pytest.raises(ValueError, match="no records of a unit"):  # no 'unit' field
    workdir_lib.load_results(str(tmp_path))
  (tmp_path / "launches").mkdir()
  (tmp_path / "launches" / "0002-broken.json").write_text("{")
  with pytest.raises(ValueError, match="0002-broken.json"):
    workdir_lib.units(str(tmp_path))


def test_load_unit_by_label_id_or_a_name_one_unit_has(tmp_path):
  wd, a, b = _two_seeds(tmp_path)
  with pytest.raises(ValueError, match="2 units .* called 'n=3 lie_algebra.*by id: "):
    workdir_lib.load_unit(wd, a)  # one label: only the ids tell them apart
  seeds = str(tmp_path / "seeds")
  helpers.write_launch(seeds, 1, [(a, "a-0"), (a, "a-1")],
                       fields={"a-0": {"seed": 0}, "a-1": {"seed": 1}})
  with pytest.raises(ValueError, match="by label or id: "):
    workdir_lib.load_unit(seeds, a)
  with pytest.raises(FileNotFoundError, match="no launch .* lists a unit 'nope'"):
    workdir_lib.load_unit(wd, "nope")
  with pytest.raises(FileNotFoundError, match="has no checkpoint"):  # found, by name
    workdir_lib.load_unit(wd, b)


def test_frame_or_list(tmp_path, monkeypatch):
  wd, _, _ = _two_seeds(tmp_path)
  monkeypatch.setitem(sys.modules, "pandas", None)  # pandas not installed
  assert isinstance(workdir_lib.load_results(wd), list)
  with pytest.raises(ImportError, match=r"pip install lie_unitary\[pandas\]"):
    workdir_lib.load_results(wd, as_frame=True)
  assert isinstance(workdir_lib.load_results(wd, as_frame=False), list)


def test_frame_with_pandas(tmp_path):
  pd = pytest.importorskip("pandas")
  wd, _, _ = _two_seeds(tmp_path)
  df = workdir_lib.load_results(wd)
  assert isinstance(df, pd.DataFrame) and len(df) == 6
  assert sorted(df["unit"].unique()) == ["a-0", "a-1", "b-0"]
  back = workdir_lib.as_records(df)
  assert back == workdir_lib.load_results(wd, as_frame=False)


def test_as_records_drops_the_cells_a_record_lacked():
  pd = pytest.importorskip("pandas")
  recs = [{"step": 0, "val_loss": 1.0}, {"step": 20, "val_loss": "nan", "train_loss": 0.5}]
  assert workdir_lib.as_records(pd.DataFrame.from_records(recs)) == recs
  assert workdir_lib.as_records(recs) == recs


def test_merge_gathers_chosen_units_of_several_workdirs_once(tmp_path):
  a, b, dest = (str(tmp_path / x) for x in ("a", "b", "dest"))
  helpers.write_launch(a, 1, [("u", "u-0"), ("v", "v-0")],
                       fields={"u-0": {"model": "gurnn"}, "v-0": {"model": "lstm"}})
  helpers.write_launch(b, 1, [("u", "u-1")], fields={"u-1": {"model": "gurnn"}})
  for wd, units in ((a, ("u-0", "v-0")), (b, ("u-1",))):
    workdir_lib.append_records(os.path.join(wd, "results.jsonl"),
                               [_rec(uid, uid[0], seed=int(uid[-1])) for uid in units])
    workdir_lib.append_records(os.path.join(wd, "torch_reference.jsonl"),
                               [{"seed": 0, "epoch": 1, "test_accuracy": 0.5}])
  gurnn = lambda u: u["fields"]["model"] == "gurnn"
  assert merge_workdirs.merge(dest, a, gurnn) == 1 and merge_workdirs.merge(dest, b, gurnn) == 1
  assert merge_workdirs.merge(dest, b, gurnn) == 0  # nothing twice
  assert sorted(r["unit"] for r in workdir_lib.read(dest)) == ["u-0", "u-1"]
  assert list(workdir_lib.units(dest)) == ["u-0", "u-1"]  # v left out of the launch copy
  assert len(workdir_lib.read_launches(dest)) == 2  # each source's launch, once
  assert len(workdir_lib.read(dest, "torch_reference.jsonl")) == 1
  # No workdir, no unit taken, a file as destination: refused before anything is written
  # (a traceback or an empty destination before).
  (tmp_path / "file").write_text("")
  for args, match in (((dest, str(tmp_path / "missing")), "no workdir"),
                      ((dest, a, lambda u: False), "none of its units"),
                      ((str(tmp_path / "file"), a), "a file, not a workdir")):
    with pytest.raises(ValueError, match=match):
      merge_workdirs.merge(*args)
