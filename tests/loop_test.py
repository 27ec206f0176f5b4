"""The loop's bookkeeping: calls within epochs, a progress line while a long call runs."""

import time

import jax.numpy as jnp
import numpy as np

from lie_unitary.experiments import fields
from lie_unitary.experiments import loop
from lie_unitary.experiments import replicas as replicas_lib
from lie_unitary.experiments import runner


def _context(tmp_path, lines):
  return runner.UnitContext(str(tmp_path), fields.Unit("u", {"seed": 0}, 10), lines.append,
                            loop.StopRequest())


def test_calls_stop_at_epoch_ends_and_the_target(tmp_path):
  replicas = replicas_lib.Replicas(1)
  state = {"x": jnp.zeros((1, 2))}
  with loop.Loop(_context(tmp_path, []), replicas, 10) as lp:
    state, _ = lp.restore(state)
    seen = []
    for step, num in lp.calls(4, epoch_steps=6):
      seen.append((step, num))
      lp.after_call(state, step + num, {})
  assert seen == [(0, 4), (4, 2), (6, 4)]


def test_a_long_call_still_prints_progress(tmp_path):
  lines = []
  replicas = replicas_lib.Replicas(1)
  with loop.Loop(_context(tmp_path, lines), replicas, 2, progress_seconds=0.2) as lp:
    state, _ = lp.restore({"x": jnp.zeros((1, 2))})
    lp.status = "evaluating the initial state"  # done before the first call
    for step, num in lp.calls(2):
      time.sleep(1.5)  # a call (or its compilation) far longer than progress_seconds
      lp.after_call(state, step + num, {})
  during = [line for line in lines if "compiling and running the first call for" in line]
  assert len(during) >= 3, lines
  assert during[0].startswith("u: step 0/2, compiling")


def test_resume_restores_step_elapsed_and_history(tmp_path):
  replicas = replicas_lib.Replicas(2)
  fresh = {"x": jnp.zeros((2, 3))}
  with loop.Loop(_context(tmp_path, []), replicas, 10) as lp:
    state, history = lp.restore(fresh, {"curve": [0.0]})
    for step, num in lp.calls(3):
      state = {"x": state["x"] + 1}
      history["curve"].append(float(step + num))
      lp.after_call(state, step + num, history)
      if lp.step == 6:
        lp.save(state, history)
        break
  with loop.Loop(_context(tmp_path, []), replicas, 10) as lp:
    state, history = lp.restore(fresh, {"curve": [0.0]})
    assert lp.step == lp.resumed_from == 6 and lp.elapsed > 0
    assert history == {"curve": [0.0, 3.0, 6.0]}
    np.testing.assert_array_equal(replicas.gather(state)["x"], np.full((2, 3), 2.0))
