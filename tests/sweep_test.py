"""Tests of the replicate sweep: vmapped == per-replicate, padding, resume bookkeeping."""

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

