"""Replicates on a leading axis, sharded over every device, and the one way to map over them.

A unit's R replicates run as one program on a leading axis, padded to a multiple of the
devices and sharded over all of them (every host's after `jax.distributed.initialize()`);
padding replicates compute and are dropped, so replicate r gets the same keys whatever the
device count. `map_replicates` is ``jit(vmap(fn))`` on one device or accelerators; with a
data axis, or several CPU devices in one process, a `jax.shard_map` in which each device
maps its replicates, on CPU one at a time (`lax.map`): CPU devices share jaxlib's thread
pool, and two batched LAPACK calls (a vmapped eigh) running at once deadlock it.
"""

from __future__ import annotations

from typing import Any
from typing import Callable
from typing import Sequence

import jax
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

__all__ = ["AXIS", "DATA_AXIS", "Replicas", "map_replicates", "padded_size",
           "replicate_sharding"]

AXIS = "replicate"
DATA_AXIS = "data"  # the mesh axis that splits one replicate's batch


def padded_size(num_replicates: int, num_devices: int) -> int:
  """The smallest multiple of num_devices ≥ num_replicates; ValueError: either is < 1."""
  if num_replicates < 1 or num_devices < 1:
    raise ValueError(f"need num_replicates ≥ 1 and num_devices ≥ 1; got "
                     f"{num_replicates=}, {num_devices=}.")
  return -(-num_replicates // num_devices) * num_devices


def replicate_sharding(devices: Sequence[jax.Device] | None = None,
                       data_parallel: int = 1) -> NamedSharding:
  """A leading replicate axis' sharding over `devices` (default: all); data_parallel =
  d > 1 splits each replicate's batch over a DATA_AXIS of d; ValueError: d < 1 or does not
  divide the device count."""
  devices = jax.devices() if devices is None else list(devices)
  if data_parallel < 1 or len(devices) % data_parallel:
    raise ValueError(f"data_parallel = {data_parallel} must be ≥ 1 and divide the "
                     f"{len(devices)} device(s).")
  grid = np.array(devices).reshape(len(devices) // data_parallel, data_parallel)
  if data_parallel == 1:
    return NamedSharding(Mesh(grid[:, 0], (AXIS,)), P(AXIS))
  return NamedSharding(Mesh(grid, (AXIS, DATA_AXIS)), P(AXIS))


def map_replicates(fn: Callable, in_axes: Sequence[int | None], sharding: NamedSharding, *,
                   donate_argnums: Sequence[int] = ()) -> Callable:
  """The jitted program of a per-replicate `fn` over the replicate axis (in_axes: 0 or
  None, shared), every output sharded over it (module docstring)."""
  in_axes, mesh = tuple(in_axes), sharding.mesh
  mine = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
  one_at_a_time = len(mine) > 1 and mine[0].platform == "cpu"
  if not one_at_a_time:
    mapped = jax.vmap(fn, in_axes=in_axes)
  else:
    def mapped(*args):
      def one(xs):
        it = iter(xs)
        return fn(*(next(it) if axis == 0 else a for a, axis in zip(args, in_axes)))
      return jax.lax.map(one, [a for a, axis in zip(args, in_axes) if axis == 0])
  if one_at_a_time or DATA_AXIS in mesh.shape:
    mapped = jax.shard_map(mapped, mesh=mesh, check_vma=False,
                           in_specs=tuple(P(AXIS) if a == 0 else P() for a in in_axes),
                           out_specs=P(AXIS))
  return jax.jit(mapped, out_shardings=sharding, donate_argnums=tuple(donate_argnums))


class Replicas:
  """R ≥ 1 replicates on a leading axis of `sharding`'s mesh (default: every device),
  padded to a multiple of its size; `ids`: the (padded,) int32 replicate indices, sharded;
  `data_parallel`: the size of the mesh's data axis (1: none)."""

  def __init__(self, num_replicates: int, sharding: NamedSharding | None = None):
    self.num_replicates = num_replicates
    self.sharding = replicate_sharding() if sharding is None else sharding
    self.mesh = self.sharding.mesh
    self.data_parallel = self.mesh.shape.get(DATA_AXIS, 1)
    self.padded = padded_size(num_replicates, self.mesh.shape[AXIS])
    ids = np.arange(self.padded, dtype=np.int32)
    self.ids = jax.make_array_from_callback((self.padded,), self.sharding, lambda i: ids[i])

  def map(self, fn: Callable, in_axes: Sequence[int | None], *,
          donate_argnums: Sequence[int] = ()) -> Callable:
    """`map_replicates` over this sharding."""
    return map_replicates(fn, in_axes, self.sharding, donate_argnums=donate_argnums)

  def gather(self, tree: Any) -> Any:
    """A replicated pytree as numpy arrays without the padding, the same on every host."""
    if jax.process_count() > 1:
      tree = multihost_utils.process_allgather(tree, tiled=True)
    return jax.tree.map(lambda a: np.asarray(a)[:self.num_replicates], tree)

  def from_host(self, host: Any, fresh: Any) -> Any:
    """`host` (R replicates, numpy) padded with `fresh`'s padding, sharded; ValueError:
    a leaf of another shape."""
    if jax.process_count() > 1:
      fresh = multihost_utils.process_allgather(fresh, tiled=True)

    def put(h, p):
      h = np.asarray(h)
      if h.shape != (self.num_replicates,) + p.shape[1:]:
        raise ValueError(f"a stored state leaf has shape {h.shape}; expected "
                         f"{(self.num_replicates,) + p.shape[1:]}.")
      full = np.concatenate([h.astype(p.dtype), p[self.num_replicates:]])
      return jax.make_array_from_callback(full.shape, self.sharding, lambda i: full[i])

    return jax.tree.map(put, host, jax.tree.map(np.asarray, fresh))
