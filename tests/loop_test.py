"""The unit loop (`loop.train_unit`): calls sized by an injected clock within validation
points and epochs, the progress line of a long call, a stop and its resume (an owed
evaluation too), a damaged checkpoint, and checkpoints of other code."""

import glob
import os
import time

import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary.experiments import fields
from lie_unitary.experiments import loop
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner
from lie_unitary.experiments import workdir as workdir_lib

_UNIT = fields.Unit("u", {"seed": 0}, 10)


def _context(tmp_path, lines, stop=None, **flags):
  return runner.UnitContext(str(tmp_path), _UNIT, lines.append, stop or loop.StopRequest(),
                            **flags)


def _task(target=10, *, calls=None, seen=None, on_train=None, on_evaluate=None, **kwargs):
  """A counter: the state (R, 3) adds each call's steps, the history counts them; each
  validation point writes a record; `seen` gets the finished state and history."""
  def init():
    return {"x": jnp.zeros((replicas_lib.Replicas(1).padded, 3))}, {"steps": 0}

  def train(state, history, step, num):
    if calls is not None:
      calls.append((step, num))
    if on_train:
      on_train(step, num)
    return {"x": state["x"] + num}, {"steps": history["steps"] + num}

  def evaluate(state, history, step):
    if on_evaluate:
      on_evaluate(step)
    return [{"kind": "val", "replicate": 0, "step": step}], history, f"val accuracy 0.{step}"

  def finish(state, history):
    if seen is not None:
      seen.update(x=replicas_lib.Replicas(1).gather(state)["x"], history=history)
    return {workdir_lib.RESULTS: [{"kind": "final", "replicate": 0, "step": target}]}

  return loop.Task(init, train, evaluate, finish, target, **kwargs)


def _steps(tmp_path):
  return [r["step"] for r in workdir_lib.read(tmp_path)]


def test_calls_end_at_validation_points_epoch_ends_and_the_target():
  task = _task(10, every=4, epoch_steps=6, call_seconds=None)
  calls, step = [], 0
  while step < 10:
    calls.append((step, loop.call_length(task, step, None)))
    step += calls[-1][1]
  assert calls == [(0, 4), (4, 2), (6, 2), (8, 2)]
  assert [s for s in range(11) if loop.validation_point(task, s)] == [0, 4, 6, 8, 10]


def test_the_first_call_is_one_step_then_calls_last_about_call_seconds(tmp_path):
  # The loop's clock, advanced by the task (binary fractions: exact sums): the first
  # call (it compiles) takes 1/8 s, then every step 1/32 s.
  now, calls = [0.0], []

  def advance(step, num):
    now[0] += num / 32 if step else 1 / 8

  task = _task(100, every=50, call_seconds=0.25, calls=calls, on_train=advance)
  loop.train_unit(task, _context(tmp_path, []), replicas_lib.Replicas(1),
                  clock=lambda: now[0])
  # One step, then 0.25 s at the first call's rate (2 steps), then at 1/32 s a step (8),
  # each call cut short at the validation points 50 and 100.
  assert calls == [(0, 1), (1, 2), (3, 8), (11, 8), (19, 8), (27, 8), (35, 8), (43, 7),
                   (50, 8), (58, 8), (66, 8), (74, 8), (82, 8), (90, 8), (98, 2)], calls
  assert _steps(tmp_path) == [0, 50, 100, 100]  # the evaluations', then the final record


def _wait_for(lines, test):
  """Waits (10 s at most) for the progress thread to print a line that passes `test`."""
  for _ in range(1000):
    if any(test(x) for x in list(lines)):
      return
    time.sleep(0.01)
  raise AssertionError(lines[-5:])


def test_a_call_longer_than_the_progress_period_shows_its_progress(tmp_path):
  now, lines = [0.0], []

  def train(step, num):  # a clock step of 1 a step; the line is waited for mid-call
    now[0] += num / 2
    if step:
      _wait_for(lines, lambda x: f"step ≈{step + num // 2}/40 (epoch " in x and "ETA" in x)
    now[0] += num / 2

  def evaluate(step):
    if step == 40:  # the line during an evaluation shows the last one's metrics
      _wait_for(lines, lambda x: "evaluating for" in x and "val accuracy 0.30" in x)

  task = _task(40, every=20, epoch_steps=10, call_seconds=4.0, on_train=train,
               on_evaluate=evaluate)
  loop.train_unit(task, _context(tmp_path, lines), replicas_lib.Replicas(1),
                  clock=lambda: now[0], progress_seconds=0.01)
  first = [x for x in lines if "compiling" in x]
  assert not first or first[0].startswith("u seed=0: step 0/40 (epoch 0.00), compiling")
  # What the first call (compiling the training program) cost, said once.
  assert [x for x in lines if "first call took" in x] == [
      "u seed=0: first call took 1.0s: compile and 1 update"], lines


def test_a_stop_checkpoints_owes_the_evaluation_and_the_resume_makes_it(tmp_path):
  stop, lines, seen = loop.StopRequest(), [], {}
  stopping = lambda step, num: stop.request("SIGINT") if step + num == 6 else None
  with pytest.raises(loop.Interrupted):
    loop.train_unit(_task(every=3, call_seconds=None, on_train=stopping),
                    _context(tmp_path, lines, stop), replicas_lib.Replicas(1))
  assert _steps(tmp_path) == [0, 3]  # step 6's evaluation is owed
  calls = []
  loop.train_unit(_task(every=3, call_seconds=None, calls=calls, seen=seen),
                  _context(tmp_path, lines), replicas_lib.Replicas(1))
  assert any(x.startswith("u seed=0: resumed at step 6 (") for x in lines), lines
  assert calls == [(6, 3), (9, 1)] and seen["history"] == {"steps": 10}
  np.testing.assert_array_equal(seen["x"], np.full((1, 3), 10.0))
  assert _steps(tmp_path) == [0, 3, 6, 9, 10, 10]


def _save(tmp_path, step, code=None, value=None):
  """A checkpoint of the counter at `step` (`code`: its fingerprint, default this code's;
  "none": without one)."""
  replicas = replicas_lib.Replicas(1)
  ckpt = loop.checkpoints(workdir_lib.path(tmp_path, "checkpoints", _UNIT.slug))
  meta = {"step": step, "elapsed": 1.0, "history": {"steps": step}, "owed": False}
  if code != "none":
    meta["code"] = code or workdir_lib.code_fingerprint()
  x = jnp.full((replicas.padded, 3), float(step if value is None else value))
  loop.save_checkpoint(ckpt, step, replicas.gather({"x": x}), meta)
  ckpt.close()
  return ckpt.directory


def _damage(directory, step):
  """Overwrites the data files of the checkpoint at `step` (its array values)."""
  files = [f for f in glob.glob(os.path.join(directory, str(step), "**", "*"), recursive=True)
           if os.path.isfile(f) and "/d/" in f]
  assert files, os.listdir(os.path.join(directory, str(step)))
  for f in files:
    with open(f, "r+b") as fh:
      fh.write(b"\0" * max(1, os.path.getsize(f)))


def test_a_damaged_checkpoint_falls_back_to_the_previous_one_or_the_start(tmp_path):
  _save(tmp_path, 3)
  directory = _save(tmp_path, 6)
  _damage(directory, 6)
  lines, calls = [], []
  loop.train_unit(_task(7, calls=calls), _context(tmp_path, lines), replicas_lib.Replicas(1))
  assert calls == [(3, 1), (4, 3)]  # from step 3 (one step, then to the target)
  said, = [x for x in lines if "could not be read" in x]
  assert "step 6" in said and "the previous one is used" in said and "\n" not in said
  assert any(f.startswith("damaged-6-") for f in os.listdir(directory))  # kept aside
  other = tmp_path / "other"
  _damage(_save(other, 3), 3)
  lines.clear()
  calls.clear()
  loop.train_unit(_task(2, calls=calls), _context(other, lines), replicas_lib.Replicas(1))
  assert calls == [(0, 1), (1, 1)] and any("step 3" in x and "restarting" in x for x in lines)


def test_the_fingerprint_names_each_file_that_can_change_a_number(tmp_path):
  package = tmp_path / "pkg"
  (package / "nn").mkdir(parents=True)
  for name, text in [("core.py", "x = 1\n"), ("nn/cell.py", "y = 2\n"), ("report.py", "z\n"),
                     ("notes.txt", "n\n")]:
    (package / name).write_text(text)
  before = workdir_lib.code_fingerprint(str(package))
  assert sorted(before["files"]) == ["pkg/core.py", "pkg/nn/cell.py"]  # no report, no text
  assert set(before["versions"]) == {"jax", "jaxlib", "flax", "optax"}
  (package / "report.py").write_text("other\n")
  assert workdir_lib.code_changes(before, workdir_lib.code_fingerprint(str(package))) == []
  (package / "nn/cell.py").write_text("y = 3\n")
  (package / "core.py").unlink()
  (package / "extra.py").write_text("\n")
  after = workdir_lib.code_fingerprint(str(package))
  after["versions"]["jax"] = "0.0.1"
  assert workdir_lib.code_changes(before, after) == [
      "pkg/core.py removed", "pkg/extra.py added", "pkg/nn/cell.py changed",
      f"jax {before['versions']['jax']} → 0.0.1"]


def test_a_checkpoint_of_other_code_is_refused_unless_asked_and_an_old_one_is_said(
    tmp_path):
  this = workdir_lib.code_fingerprint()
  other = {"files": {**this["files"], "lie_unitary/nn/cells.py": "0" * 16},
           "versions": this["versions"]}
  _save(tmp_path, 4, code=other, value=1.0)
  with pytest.raises(fields.ConfigError, match="step 4 was written by other code .*cells.py "
                     "changed"):
    loop.train_unit(_task(), _context(tmp_path, []), replicas_lib.Replicas(1))
  lines, seen = [], {}
  loop.train_unit(_task(seen=seen), _context(tmp_path, lines, resume_across_code_change=True),
                  replicas_lib.Replicas(1))
  np.testing.assert_array_equal(seen["x"], np.full((1, 3), 7.0))  # 1 at step 4, 6 steps
  assert any("across a code change (lie_unitary/nn/cells.py changed)" in x for x in lines), lines
  # A checkpoint saved before fingerprints existed resumes, and a line says it was unchecked.
  _save(tmp_path / "old", 7, code="none")
  lines.clear()
  loop.train_unit(_task(), _context(tmp_path / "old", lines), replicas_lib.Replicas(1))
  assert any("resumed at step 7" in x for x in lines)
  assert any("predates code fingerprints" in x for x in lines), lines


def test_a_checkpoint_beyond_the_target_is_refused(tmp_path):
  _save(tmp_path, 12)
  with pytest.raises(fields.ConfigError, match="checkpoint is at step 12, beyond num_updates "
                     "= 10; ask for at least 12"):
    loop.train_unit(_task(target_field="num_updates"), _context(tmp_path, []),
                    replicas_lib.Replicas(1))
