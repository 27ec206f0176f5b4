"""The loop's bookkeeping: calls sized by time within validation points and epochs, the
progress line of a long call, resume, and a damaged checkpoint."""

import glob
import os
import time

import jax.numpy as jnp
import numpy as np

from lie_unitary.experiments import fields
from lie_unitary.experiments import loop
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner


def _context(tmp_path, lines, stop=None):
  return runner.UnitContext(str(tmp_path), fields.Unit("u", {"seed": 0}, 10), lines.append,
                            stop or loop.StopRequest())


def test_calls_end_at_validation_points_epoch_ends_and_the_target(tmp_path):
  state = {"x": jnp.zeros((1, 2))}
  with loop.Loop(_context(tmp_path, []), replicas_lib.Replicas(1), 10, every=4,
                 epoch_steps=6, call_seconds=None) as lp:
    state, _ = lp.restore(state)
    seen = [(step, num, end) for step, num, end in lp.calls() if not lp.after_call(
        state, step + num, {})]
  assert seen == [(0, 4, True), (4, 2, True), (6, 2, True), (8, 2, True)]
  assert [s for s in range(11) if lp.boundary(s)] == [0, 4, 6, 8, 10]


def test_the_first_call_is_one_step_then_calls_last_about_call_seconds(tmp_path):
  # The loop's clock, advanced by the test (binary fractions: exact sums): the first
  # call (it compiles) takes 1/8 s, then every step 1/32 s.
  now = [0.0]
  state = {"x": jnp.zeros((1, 2))}
  with loop.Loop(_context(tmp_path, []), replicas_lib.Replicas(1), 100, every=50,
                 call_seconds=0.25, clock=lambda: now[0]) as lp:
    state, _ = lp.restore(state)
    seen = []
    for step, num, end in lp.calls():
      now[0] += num / 32 if step else 1 / 8
      seen.append((step, num, end))
      lp.after_call(state, step + num, {})
  # One step, then 0.25 s at the first call's rate (2 steps), then at 1/32 s a step (8),
  # each call cut short at the validation points 50 and 100.
  assert seen == [(0, 1, False), (1, 2, False), (3, 8, False), (11, 8, False),
                  (19, 8, False), (27, 8, False), (35, 8, False), (43, 7, True),
                  (50, 8, False), (58, 8, False), (66, 8, False), (74, 8, False),
                  (82, 8, False), (90, 8, False), (98, 2, True)], seen


def test_a_call_longer_than_the_progress_period_shows_its_progress(tmp_path):
  lines = []
  with loop.Loop(_context(tmp_path, lines), replicas_lib.Replicas(1), 40, every=20,
                 epoch_steps=10, call_seconds=1.0, progress_seconds=0.25) as lp:
    state, _ = lp.restore({"x": jnp.zeros((1, 2))})
    for step, num, end in lp.calls():
      time.sleep(0.05 * num)  # 50 ms a step: a call of about 1 s after the first
      if end:
        lp.doing("evaluating")
        time.sleep(0.6)
        lp.show(f"val accuracy 0.{step + num}")
      lp.after_call(state, step + num, {})
  training = [x for x in lines if ", training" in x]
  # Within a call the step is an estimate from the rate, with the epoch and the ETA.
  assert any("u seed=0: step ≈" in x and "(epoch " in x and "ETA" in x for x in training)
  # After the first validation every line shows its metrics, the evaluation's too.
  assert any("evaluating for" in x and "val accuracy 0.20" in x for x in lines), lines
  assert any(", training;" in x and "val accuracy 0.20" in x for x in lines), lines
  first = [x for x in lines if "compiling" in x]
  assert not first or first[0].startswith("u seed=0: step 0/40 (epoch 0.00), compiling")
  # What the first call (compiling the training program) cost, said once.
  assert sum(x.startswith("u seed=0: first call took ") for x in lines) == 1, lines


def test_resume_restores_step_elapsed_and_history(tmp_path):
  replicas = replicas_lib.Replicas(2)
  fresh = {"x": jnp.zeros((2, 3))}
  with loop.Loop(_context(tmp_path, []), replicas, 10, every=3, call_seconds=None) as lp:
    state, history = lp.restore(fresh, {"curve": [0.0]})
    for step, num, _ in lp.calls():
      state = {"x": state["x"] + 1}
      history["curve"].append(float(step + num))
      lp.after_call(state, step + num, history)
      if lp.step == 6:
        lp.save(state, history)
        break
  with loop.Loop(_context(tmp_path, []), replicas, 10, every=3) as lp:
    state, history = lp.restore(fresh, {"curve": [0.0]})
    assert lp.step == lp.resumed_from == 6 and lp.elapsed > 0
    assert history == {"curve": [0.0, 3.0, 6.0]}
    np.testing.assert_array_equal(replicas.gather(state)["x"], np.full((2, 3), 2.0))


def _damage(directory, step):
  """Overwrites the data files of the checkpoint at `step` (its array values)."""
  files = [f for f in glob.glob(os.path.join(directory, str(step), "**", "*"), recursive=True)
           if os.path.isfile(f) and "/d/" in f]
  assert files, os.listdir(os.path.join(directory, str(step)))
  for f in files:
    with open(f, "r+b") as fh:
      fh.write(b"\0" * max(1, os.path.getsize(f)))


def test_a_damaged_checkpoint_falls_back_to_the_previous_one_or_the_start(tmp_path):
  replicas, fresh = replicas_lib.Replicas(1), {"x": jnp.zeros((1, 3))}
  with loop.Loop(_context(tmp_path, []), replicas, 10) as lp:
    state, _ = lp.restore(fresh)
    for step in (3, 6):
      lp.step, state = step, {"x": jnp.full((1, 3), float(step))}
      lp.save(state, {"at": step})
    directory = lp._ckpt.directory
  _damage(directory, 6)
  lines = []
  with loop.Loop(_context(tmp_path, lines), replicas, 10) as lp:
    state, history = lp.restore(fresh)
    assert (lp.step, history) == (3, {"at": 3})
    np.testing.assert_array_equal(replicas.gather(state)["x"], np.full((1, 3), 3.0))
  said, = [x for x in lines if "could not be read" in x]
  assert "step 6" in said and "the previous one is used" in said and "\n" not in said
  assert any(f.startswith("damaged-6-") for f in os.listdir(directory))  # kept aside
  _damage(directory, 3)
  lines.clear()
  with loop.Loop(_context(tmp_path, lines), replicas, 10) as lp:
    state, history = lp.restore(fresh)
    assert (lp.step, history) == (0, {})
  assert any("step 3" in x and "restarting" in x for x in lines), lines


def test_the_fingerprint_names_each_file_that_can_change_a_number(tmp_path):
  from lie_unitary.experiments import workdir as workdir_lib
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
    tmp_path, monkeypatch):
  from lie_unitary.experiments import workdir as workdir_lib
  replicas, fresh = replicas_lib.Replicas(1), {"x": jnp.zeros((1, 3))}
  this = workdir_lib.code_fingerprint()
  other = {"files": {**this["files"], "lie_unitary/nn/cells.py": "0" * 16},
           "versions": this["versions"]}
  monkeypatch.setattr(workdir_lib, "code_fingerprint", lambda: other)
  with loop.Loop(_context(tmp_path, []), replicas, 10) as lp:
    lp.restore(fresh)
    lp.step = 4
    lp.save({"x": jnp.ones((1, 3))}, {})
  monkeypatch.setattr(workdir_lib, "code_fingerprint", lambda: this)
  with loop.Loop(_context(tmp_path, []), replicas, 10) as lp:
    with np.testing.assert_raises_regex(fields.ConfigError,
                                        "step 4 was written by other code .*cells.py changed"):
      lp.restore(fresh)
  lines = []
  ctx = _context(tmp_path, lines)
  ctx.resume_across_code_change = True
  with loop.Loop(ctx, replicas, 10) as lp:
    state, _ = lp.restore(fresh)
    assert lp.step == 4
    np.testing.assert_array_equal(replicas.gather(state)["x"], np.ones((1, 3)))
  assert any("across a code change (lie_unitary/nn/cells.py changed)" in x for x in lines), lines
  # A checkpoint saved before fingerprints existed resumes, and a line says it was unchecked.
  with loop.Loop(_context(tmp_path, []), replicas, 10) as lp:
    lp._ckpt.save(7, replicas.gather({"x": jnp.full((1, 3), 7.0)}),
                  {"step": 7, "elapsed": 1.0, "history": {}})
  lines.clear()
  with loop.Loop(_context(tmp_path, lines), replicas, 10) as lp:
    lp.restore(fresh)
    assert lp.step == 7
  assert any("predates code fingerprints" in x for x in lines), lines
