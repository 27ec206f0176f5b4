"""Worker processes: one claim per unit, the environment protocol, failures reported."""

import os

import pytest

from lie_unitary.experiments import workers

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A worker: claims what it can of six units, writes them and the worker count to
# OUT/w{i}.txt; worker 1 exits with the code given.
_PROBE = """
import os, sys
from lie_unitary.experiments import workers
i = workers.worker_prefix().split()[1].split('/')[0]
claim = workers.claimer_from_env()
taken = ''.join(u for u in 'abcdef' if claim(u))
open(os.path.join(sys.argv[1], 'w' + i + '.txt'), 'w').write(
    taken + ':' + str(workers.num_workers()))
sys.exit(int(sys.argv[2]) if i == '1' else 0)
"""


def _run(tmp_path, monkeypatch, exit_code_of_worker_1):
  monkeypatch.setenv("PYTHONPATH", _ROOT)
  workers.run_workers(3, str(tmp_path), ["-c", _PROBE, str(tmp_path),
                                         str(exit_code_of_worker_1)], printer=lambda _: None)


def test_every_unit_is_claimed_by_exactly_one_worker(tmp_path, monkeypatch):
  _run(tmp_path, monkeypatch, 0)
  outputs = [open(tmp_path / f"w{i}.txt").read().split(":") for i in range(3)]
  assert [count for _, count in outputs] == ["3", "3", "3"]
  assert "".join(sorted("".join(taken for taken, _ in outputs))) == "abcdef"
  assert not any(p.startswith(".claims-") for p in os.listdir(tmp_path))


def test_a_failing_worker_is_named(tmp_path, monkeypatch):
  with pytest.raises(RuntimeError, match=r"worker 1 \(exit code 3\)"):
    _run(tmp_path, monkeypatch, 3)


def test_outside_a_worker_everything_is_ours(monkeypatch):
  monkeypatch.delenv("LIE_UNITARY_WORKER", raising=False)
  assert workers.claimer_from_env() is None
  assert workers.num_workers() == 1 and workers.worker_prefix() == ""
  with pytest.raises(ValueError, match="num_workers"):
    workers.run_workers(0, "/nonexistent")
