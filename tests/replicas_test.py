"""Replicates: a mapped program carries a sharded state between calls; padding; host form."""

import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary.experiments import replicas as replicas_lib


def test_padded_size():
  assert replicas_lib.padded_size(5, 4) == 8
  assert replicas_lib.padded_size(8, 4) == 8
  assert replicas_lib.padded_size(1, 1) == 1
  with pytest.raises(ValueError, match="num_replicates"):
    replicas_lib.padded_size(0, 4)


def test_replicate_map_carries_sharded_state_between_calls():
  replicas = replicas_lib.Replicas(5)
  init = replicas.map(lambda r: {"x": jnp.float32(r) * jnp.ones(3)}, (0,))
  step = replicas.map(lambda r, state, k: ({"x": state["x"] * 2 + k}, jnp.sum(state["x"])),
                      (0, 0, None), donate_argnums=(1,))
  state = init(replicas.ids)
  state, total = step(replicas.ids, state, jnp.float32(1))
  state, total = step(replicas.ids, state, jnp.float32(1))
  x = replicas.gather(state)["x"]
  np.testing.assert_allclose(x[:, 0], 4 * np.arange(5) + 3)
  np.testing.assert_allclose(replicas.gather(total), 3 * (2 * np.arange(5) + 1))


def test_host_form_round_trip_restores_every_replicate():
  replicas = replicas_lib.Replicas(3)
  fresh = replicas.map(lambda r: {"x": jnp.float32(r) * jnp.ones(2)}, (0,))(replicas.ids)
  host = {"x": np.array([[7.0, 7.0], [8.0, 8.0], [9.0, 9.0]], np.float32)}
  back = replicas.from_host(host, fresh)
  np.testing.assert_array_equal(replicas.gather(back)["x"], host["x"])
  with pytest.raises(ValueError, match="stored state leaf"):
    replicas.from_host({"x": host["x"][:2]}, fresh)
