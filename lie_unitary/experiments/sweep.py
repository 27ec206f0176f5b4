"""Replicate sweeps: jitted, vmapped programs sharded over every device.

`ReplicateMap(R)` evaluates per-replicate functions for replicate 0..R-1 as
``jit(vmap(fn))`` with the replicate axis sharded over a 1-D mesh of all devices
(`jax.devices()`: every local device, and every host's devices after
`jax.distributed.initialize()`), call after call (a training run in chunks with a
checkpoint between them): the state stays sharded on the devices between calls.
When R does not divide evenly the axis is padded with extra replicate indices whose
results are computed and dropped, so replicate r always gets the same keys and
results whatever the device count.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec


__all__ = ["ReplicateMap", "gather", "padded_size", "replicate_sharding"]

AXIS = "replicate"


def padded_size(num_replicates: int, num_devices: int) -> int:
  """The smallest multiple of num_devices that is ≥ num_replicates."""
  if num_replicates < 1 or num_devices < 1:
    raise ValueError(f"need num_replicates ≥ 1 and num_devices ≥ 1; got "
                     f"{num_replicates=}, {num_devices=}.")
  return -(-num_replicates // num_devices) * num_devices


def replicate_sharding(devices: Sequence[jax.Device] | None = None) -> NamedSharding:
  """Sharding of a leading replicate axis over a 1-D mesh of `devices` (default: all)."""
  devices = jax.devices() if devices is None else list(devices)
  return NamedSharding(Mesh(np.array(devices), (AXIS,)), PartitionSpec(AXIS))


def gather(tree: Any, num_replicates: int) -> Any:
  """A sharded pytree with a leading replicate axis as numpy arrays [:num_replicates],
  identical on every host."""
  if jax.process_count() > 1:
    tree = multihost_utils.process_allgather(tree, tiled=True)
  return jax.tree.map(lambda a: np.asarray(a)[:num_replicates], tree)


class ReplicateMap:
  """Maps per-replicate functions over all replicates, sharded, call after call.

  ``rmap(fn, *state, *scalars)`` runs ``jit(vmap(fn))`` over the (padded) replicate
  ids and the leading axis of each `state` pytree, with extra scalar arguments
  broadcast; outputs keep the replicate axis, sharded like the inputs, so they can
  be fed to the next call. Each distinct `fn` is compiled once (cached on the
  function object and its static arguments).

  Args:
    num_replicates: R ≥ 1.
    devices: the devices to shard over; default `jax.devices()` (all hosts).
  """

  def __init__(self, num_replicates: int, devices: Sequence[jax.Device] | None = None):
    self.num_replicates = num_replicates
    self.sharding = replicate_sharding(devices)
    self.padded = padded_size(num_replicates, self.sharding.mesh.size)
    ids = np.arange(self.padded, dtype=np.int32)
    self.ids = jax.make_array_from_callback((self.padded,), self.sharding,
                                            lambda index: ids[index])
    self._compiled = {}

  def __call__(self, fn: Callable, *args, num_state: int = 0, static: tuple = ()) -> Any:
    """Runs ``fn(replicate, *args[:num_state] (per replicate), *args[num_state:], *static)``.

    Args:
      fn: a pure per-replicate function.
      *args: `num_state` pytrees with a leading replicate axis, then scalars
        broadcast to every replicate (traced: changing them does not recompile).
      num_state: how many of `args` carry the replicate axis.
      static: Python values passed last, baked into the compiled program.

    Returns:
      fn's outputs with a leading (padded) replicate axis, sharded.
    """
    key = (fn, num_state, len(args), static)
    if key not in self._compiled:
      in_axes = (0,) + (0,) * num_state + (None,) * (len(args) - num_state)
      body = lambda *a: fn(*a, *static)  # noqa: E731
      self._compiled[key] = jax.jit(jax.vmap(body, in_axes=in_axes),
                                    out_shardings=self.sharding)
    return self._compiled[key](self.ids, *args)

  def gather(self, tree: Any) -> Any:
    """`gather(tree, num_replicates)`: numpy, padding dropped."""
    return gather(tree, self.num_replicates)
