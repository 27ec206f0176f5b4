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

from typing import Any
from typing import Callable
from typing import Sequence

import jax
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec
import numpy as np

__all__ = ["AXIS", "DATA_AXIS", "ReplicateMap", "Replicas", "gather", "padded_size",
           "replicate_sharding"]

AXIS = "replicate"
# The mesh axis over which one replicate's batch is split (data parallelism).
DATA_AXIS = "data"


def padded_size(num_replicates: int, num_devices: int) -> int:
  """The smallest multiple of num_devices that is ≥ num_replicates."""
  if num_replicates < 1 or num_devices < 1:
    raise ValueError(f"need num_replicates ≥ 1 and num_devices ≥ 1; got "
                     f"{num_replicates=}, {num_devices=}.")
  return -(-num_replicates // num_devices) * num_devices


def replicate_sharding(devices: Sequence[jax.Device] | None = None,
                       data_parallel: int = 1) -> NamedSharding:
  """Sharding of a leading replicate axis over the mesh of `devices` (default: all).

  Args:
    devices: the devices, default `jax.devices()` (every host's).
    data_parallel: d ≥ 1. 1: a 1-D mesh (AXIS,). d > 1: a (count / d, d) mesh
      (AXIS, DATA_AXIS): replicates over the first axis, each replicate's batch split
      over the second (the arrays are replicated along it).

  Raises:
    ValueError: if d < 1 or d does not divide the number of devices.
  """
  devices = jax.devices() if devices is None else list(devices)
  if data_parallel < 1 or len(devices) % data_parallel:
    raise ValueError(f"data_parallel = {data_parallel} must be ≥ 1 and divide the "
                     f"{len(devices)} device(s).")
  if data_parallel == 1:
    return NamedSharding(Mesh(np.array(devices), (AXIS,)), PartitionSpec(AXIS))
  grid = np.array(devices).reshape(len(devices) // data_parallel, data_parallel)
  return NamedSharding(Mesh(grid, (AXIS, DATA_AXIS)), PartitionSpec(AXIS))


def gather(tree: Any, num_replicates: int) -> Any:
  """A sharded pytree with a leading replicate axis as numpy arrays [:num_replicates],
  identical on every host."""
  if jax.process_count() > 1:
    tree = multihost_utils.process_allgather(tree, tiled=True)
  return jax.tree.map(lambda a: np.asarray(a)[:num_replicates], tree)


class Replicas:
  """R replicates on a leading axis, padded to a multiple of the devices and sharded.

  `to_host` and `from_host` move a state between its device form (padded, sharded) and
  its host form (numpy, exactly R replicates): checkpoints hold the host form, so a
  state saved on one device count is restored on any other.

  Args:
    num_replicates: R ≥ 1.
    sharding: the replicate axis' sharding (default `replicate_sharding()`: all
      devices); its mesh's first axis is the replicate axis.
  """

  def __init__(self, num_replicates: int, sharding: NamedSharding | None = None):
    self.num_replicates = num_replicates
    self.sharding = replicate_sharding() if sharding is None else sharding
    self.padded = padded_size(num_replicates, self.sharding.mesh.shape[AXIS])
    ids = np.arange(self.padded, dtype=np.int32)
    self.ids = jax.make_array_from_callback((self.padded,), self.sharding,
                                            lambda index: ids[index])

  def gather(self, tree: Any) -> Any:
    """`gather(tree, num_replicates)`: numpy, padding dropped."""
    return gather(tree, self.num_replicates)

  def to_host(self, tree: Any) -> Any:
    """The state's R replicates as numpy arrays (every host gets all of them)."""
    return self.gather(tree)

  def from_host(self, host: Any, fresh: Any) -> Any:
    """`host` (R replicates, numpy) back on the devices, padded with `fresh`'s padding
    replicates (whatever they hold: their results are dropped) and sharded.

    Raises:
      ValueError: a leaf of `host` does not have R replicates and `fresh`'s shape.
    """
    pad = gather(fresh, self.padded)

    def put(h, p):
      h = np.asarray(h)
      if h.shape != (self.num_replicates,) + p.shape[1:]:
        raise ValueError(f"a stored state leaf has shape {h.shape}; expected "
                         f"{(self.num_replicates,) + p.shape[1:]}.")
      full = np.concatenate([h.astype(p.dtype), p[self.num_replicates:]])
      return jax.make_array_from_callback(full.shape, self.sharding, lambda i: full[i])

    return jax.tree.map(put, host, pad)


class ReplicateMap(Replicas):
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
    super().__init__(num_replicates, replicate_sharding(devices))
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
