"""A unit's R replicates as one program: a leading axis padded to a multiple of the devices
(every host's) and sharded over them; the padding computes and is dropped, so replicate r
gets the same keys whatever the device count."""

from typing import Any
from typing import Callable
from typing import Sequence

import jax
from jax.experimental import multihost_utils
from jax.sharding import Mesh
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

AXIS = "replicate"
DATA_AXIS = "data"  # the mesh axis that splits one replicate's batch


def padded_size(num_replicates: int, num_devices: int) -> int:
  """The smallest multiple of num_devices ≥ num_replicates; ValueError: either is < 1."""
  if num_replicates < 1 or num_devices < 1:
    raise ValueError(f"need num_replicates, num_devices ≥ 1; got {num_replicates=}, "
                     f"{num_devices=}.")
  return -(-num_replicates // num_devices) * num_devices


def replicate_sharding(devices: Sequence[jax.Device] | None = None,
                       data_parallel: int = 1) -> NamedSharding:
  """The replicate axis' sharding over `devices` (default: all), each replicate's batch
  split over a DATA_AXIS of `data_parallel` (ValueError: not a divisor of their count)."""
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
  """``jit(vmap(fn))`` over the replicate axis (in_axes: 0, or None: shared), outputs
  sharded; a `shard_map` with a data axis or several CPU devices."""
  in_axes, mesh = tuple(in_axes), sharding.mesh
  mine = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
  # CPU devices share jaxlib's thread pool, which two batched LAPACK calls (a vmapped eigh)
  # running at once deadlock: each maps its replicates one at a time.
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
  """R ≥ 1 replicates over `sharding` (default: every device); `ids`: the (padded,) int32
  replicate indices, sharded."""

  def __init__(self, num_replicates: int, sharding: NamedSharding | None = None):
    self.num_replicates = num_replicates
    self.sharding = replicate_sharding() if sharding is None else sharding
    self.mesh = self.sharding.mesh
    self.padded = padded_size(num_replicates, self.mesh.shape[AXIS])
    ids = np.arange(self.padded, dtype=np.int32)
    self.ids = jax.make_array_from_callback((self.padded,), self.sharding, lambda i: ids[i])

  def map(self, fn: Callable, in_axes: Sequence[int | None], *,
          donate_argnums: Sequence[int] = ()) -> Callable:
    """`map_replicates` over this sharding."""
    return map_replicates(fn, in_axes, self.sharding, donate_argnums=donate_argnums)

  def gather(self, tree: Any) -> Any:
    """A replicated pytree as numpy arrays, unpadded, the same on every host."""
    if jax.process_count() > 1:
      tree = multihost_utils.process_allgather(tree, tiled=True)
    return jax.tree.map(lambda a: np.asarray(a)[:self.num_replicates], tree)

  def from_host(self, host: Any, fresh: Any) -> Any:
    """`host` (R replicates) padded with `fresh`'s padding, sharded (ValueError: a shape)."""
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
