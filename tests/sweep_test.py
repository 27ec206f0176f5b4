"""Tests of the replicate sweep: vmapped == per-replicate, padding, resume bookkeeping."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary.experiments import sweep


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


def test_replicate_map_carries_sharded_state_between_calls():
  rmap = sweep.ReplicateMap(5)

  def init(r):
    return {"x": jnp.float32(r) * jnp.ones(3)}

  def step(r, state, k):
    return {"x": state["x"] * 2 + k}, jnp.sum(state["x"])

  state = rmap(init)
  state, total = rmap(step, state, jnp.float32(1), num_state=1)
  state, total = rmap(step, state, jnp.float32(1), num_state=1)
  x = rmap.gather(state)["x"]
  np.testing.assert_allclose(x[:, 0], 4 * np.arange(5) + 3)
  np.testing.assert_allclose(rmap.gather(total), 3 * (2 * np.arange(5) + 1))

