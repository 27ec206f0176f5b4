"""A launch killed (SIGKILL) at the moments that matter, rerun until done, writes each
record once: during a unit's record write, between its records and its checkpoint, and
between its records and its finished line.

Each launch is a subprocess whose workdir functions are wrapped to kill the process
at the N-th time a moment comes (`_DRIVER`), not after a delay: the kill lands where
it is meant to on a busy machine too.
"""

import collections
import os
import subprocess
import sys

import pytest

from lie_unitary.experiments import workdir as workdir_lib

import helpers

# argv: family, workdir, moment ("" for none), N, then config overrides as FIELD=PYTHON.
_DRIVER = r"""
import ast, os, signal, sys
from lie_unitary.experiments import loop, runner, workdir
family, folder, moment, nth, *changes = sys.argv[1:]
seen = [0]

def due(name):
  if name == moment:
    seen[0] += 1
    return seen[0] == int(nth)
  return False

def die():
  os.kill(os.getpid(), signal.SIGKILL)

append, save, finish = workdir.append_records, loop.save_checkpoint, workdir.mark_finished

def append_records(file, records, key=None):
  if os.path.basename(file) != workdir.FINISHED and due("record"):
    records = [workdir.to_jsonable(r) for r in records]
    text = "".join(workdir.json.dumps(r, sort_keys=True) + "\n" for r in records)
    with open(file, "a", encoding="utf-8") as f:  # a line and a half, then the kill
      f.write(text[:text.index("\n") + 1 + len(text.split("\n")[1]) // 2])
    die()
  append(file, records, key)
  if os.path.basename(file) != workdir.FINISHED and due("after_record"):
    die()

def checkpoint(*args):
  if due("checkpoint"):
    die()
  save(*args)

def mark_finished(*args):
  if due("finished"):
    die()
  finish(*args)

workdir.append_records, loop.save_checkpoint = append_records, checkpoint
workdir.mark_finished = mark_finished
fam = runner.get_family(family)
config = __import__(f"lie_unitary.experiments.{family}.config", fromlist=["x"]).get_config(
    f"{family}_smoke")
for change in changes:
  field, value = change.split("=", 1)
  config[field] = ast.literal_eval(value)
runner.train_and_evaluate(fam, config, folder, handle_signals=False)
"""

_CONFIGS = {
    "operators": ["n_values=(3,)", "approaches=('true', 'lie_algebra')", "num_replicates=2",
                  "num_train=400", "val_every=5", "num_epochs=((0, 1),)"],
    "rnn": ["model=('tanh',)", "num_updates=40", "num_replicates=2"],
}
# (moment, N) of each killed launch, in order; then a launch runs to the end.
_KILLS = {
    # The baselines unit: killed within its records, then after them (before its
    # finished line); the trained unit: within its final records, between them and its
    # curves, and after both (the rerun writes only the curves: the records it has are
    # not passed again).
    "operators": [("record", 1), ("after_record", 1), ("finished", 1), ("record", 2),
                  ("after_record", 1), ("after_record", 1), ("finished", 1)],
    # Within a validation's records, between them and the final checkpoint, and between
    # the final records and the finished line.
    "rnn": [("record", 2), ("checkpoint", 1), ("record", 1), ("finished", 1)],
}


def _launch(family, folder, moment="", nth=0):
  env = {**os.environ, "PYTHONPATH": helpers.ROOT, "OPENBLAS_NUM_THREADS": "1",
         "JAX_PLATFORMS": "cpu"}
  return subprocess.run([sys.executable, "-c", _DRIVER, family, str(folder), moment,
                         str(nth), *_CONFIGS[family]], capture_output=True, text=True,
                        env=env, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["operators", "rnn"])
def test_records_are_written_once_whatever_the_moment_of_a_kill(tmp_path, family):
  killed = tmp_path / "killed"
  for moment, nth in _KILLS[family]:
    proc = _launch(family, killed, moment, nth)
    assert proc.returncode == -9, (moment, nth, proc.stdout[-2000:], proc.stderr[-3000:])
  done = _launch(family, killed)
  assert done.returncode == 0, done.stderr[-3000:]
  clean = tmp_path / "clean"  # never killed: the records to expect
  proc = _launch(family, clean)
  assert proc.returncode == 0, proc.stderr[-3000:]
  for name in (workdir_lib.RESULTS, workdir_lib.CURVES, workdir_lib.FINISHED):
    for line in (killed / name).read_text().splitlines() if (killed / name).exists() else ():
      assert line.endswith("}"), (name, line)  # no half line left
    got, want = (collections.Counter(
        (workdir_lib.record_key(r) if name != workdir_lib.FINISHED else r["unit"])
        for r in workdir_lib.read(folder, name)) for folder in (killed, clean))
    assert max(got.values(), default=1) == 1, (name, got)
    assert got == want, name
