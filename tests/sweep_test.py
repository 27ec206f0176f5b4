"""Tests of the replicate sweep: vmapped == per-replicate, padding, resume bookkeeping."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary.experiments import records, sweep


def test_padded_size():
  assert sweep.padded_size(5, 4) == 8
  assert sweep.padded_size(8, 4) == 8
  assert sweep.padded_size(1, 1) == 1
  with pytest.raises(ValueError, match="num_replicates"):
    sweep.padded_size(0, 4)


def test_run_replicates_equals_a_loop_over_replicates():
  def fn(r):
    key = jax.random.fold_in(jax.random.key(0), r)
    m = jax.random.normal(key, (3, 3))
    return {"norm": jnp.linalg.norm(m), "row": m[0] * r}

  out = sweep.run_replicates(fn, 5)
  assert out["norm"].shape == (5,) and out["row"].shape == (5, 3)
  for r in range(5):
    ref = jax.jit(fn)(jnp.int32(r))
    np.testing.assert_allclose(out["norm"][r], ref["norm"], rtol=1e-6)
    np.testing.assert_allclose(out["row"][r], ref["row"], rtol=1e-6)


def test_run_settings_skips_finished_settings_and_writes_records(tmp_path):
  results = str(tmp_path / "results.jsonl")
  curves = str(tmp_path / "curves.jsonl")
  calls = []
  lines = []

  def run(s):
    calls.append(s)
    return [dict(setting=s, replicate=r, value=s * 10 + r) for r in range(2)], \
           [dict(setting=s, curve=[1.0, 0.5])]

  kwargs = dict(label=lambda s: f"setting {s}",
                expected_keys=lambda s: [(s, r) for r in range(2)], run=run,
                results_path=results, curves_path=curves,
                key_fields=("setting", "replicate"), printer=lines.append)
  assert sweep.run_settings([0, 1], **kwargs) == 2
  assert calls == [0, 1] and len(lines) == 2 and "ETA" in lines[0]
  recs = records.read_records(results)
  assert [r["value"] for r in recs] == [0, 1, 10, 11]
  assert all("seconds" in r for r in recs)
  # Resume: settings 0 and 1 are on disk; only 2 runs.
  assert sweep.run_settings([0, 1, 2], **kwargs) == 1
  assert calls == [0, 1, 2]
  assert "already done" in lines[2] and len(records.read_records(results)) == 6
  assert len(records.read_records(curves)) == 3
