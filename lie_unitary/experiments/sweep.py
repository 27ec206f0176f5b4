"""Replicate sweeps: one jitted, vmapped program per setting, sharded over devices.

`run_replicates(fn, num_replicates)` evaluates ``fn(replicate)`` for replicate
0..R-1 as ``jit(vmap(fn))`` with the replicate axis sharded over a 1-D mesh of all
devices (`jax.devices()`: every local device, and every host's devices after
`jax.distributed.initialize()`). When R does not divide evenly the axis is padded
with extra replicate indices whose results are computed and dropped, so replicate r
always gets the same keys and results whatever the device count.

`run_settings` is the resumable loop over settings shared by experiments: it skips
settings whose records are already in the JSONL file, runs the rest, appends their
records (fsynced) and prints one progress line per setting with its time and ETA.
A run killed at any moment loses at most the setting in progress. Several worker
processes can share the settings (`lie_unitary.workers`, the launchers'
``--num_workers``): each takes the next unclaimed one.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from lie_unitary.experiments import records as records_lib
from lie_unitary.experiments import workers

__all__ = ["padded_size", "replicate_sharding", "run_replicates", "run_settings"]

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


def run_replicates(fn: Callable[[jax.Array], Any], num_replicates: int,
                   devices: Sequence[jax.Device] | None = None) -> Any:
  """Runs ``fn(replicate)`` for every replicate as one jitted, vmapped, sharded program.

  Args:
    fn: pure function of an int32 scalar replicate index returning a pytree of arrays
      (traced once, under `jax.vmap`).
    num_replicates: R ≥ 1.
    devices: the devices to shard over; default `jax.devices()` (all hosts).

  Returns:
    The pytree of numpy arrays with a leading axis of size R, identical on every host.
  """
  sharding = replicate_sharding(devices)
  padded = padded_size(num_replicates, sharding.mesh.size)
  ids = np.arange(padded, dtype=np.int32)
  ids = jax.make_array_from_callback((padded,), sharding, lambda index: ids[index])
  out = jax.jit(jax.vmap(fn), in_shardings=sharding, out_shardings=sharding)(ids)
  if jax.process_count() > 1:
    out = multihost_utils.process_allgather(out, tiled=True)
  return jax.tree.map(lambda a: np.asarray(a)[:num_replicates], out)


def run_settings(settings: Sequence[Any], *, label: Callable[[Any], str],
                 expected_keys: Callable[[Any], Sequence[tuple]],
                 run: Callable[[Any], tuple[list[dict], list[dict]]],
                 results_path: str, curves_path: str | None, key_fields: Sequence[str],
                 claim: Callable[[str], bool] | None = None, printer=print) -> int:
  """The resumable loop over settings.

  Args:
    settings: the units of work, in order.
    label: a setting's progress label.
    expected_keys: the record keys (tuples over `key_fields`) a finished setting has
      written; a setting is skipped when all of them are in `results_path`.
    run: computes a setting; returns (result records, curve records). The results
      carry a ``seconds`` field if `run` sets it; otherwise the setting's wall time.
    results_path: the JSONL file of results (the resume marker).
    curves_path: JSONL file for the curve records (written before the results), or None.
    key_fields: record fields that identify one result.
    claim: in a worker process (`lie_unitary.workers`), ``claim(label) -> bool``
      says whether this worker takes an unfinished setting (False: another has it).
    printer: where progress lines go.

  Returns:
    The number of settings computed (not skipped).
  """
  done = records_lib.finished_keys(results_path, key_fields)
  progress = records_lib.Progress(len(settings), printer, workers.num_workers())
  computed = 0
  for setting in settings:
    if all(tuple(k) in done for k in expected_keys(setting)):
      progress.skip(label(setting))
      continue
    if claim is not None and not claim(label(setting)):
      progress.skip(label(setting), "taken by another worker")
      continue
    start = time.perf_counter()
    results, curves = run(setting)
    seconds = time.perf_counter() - start
    for r in results:
      r.setdefault("seconds", seconds)
    if jax.process_index() == 0:
      if curves_path is not None:
        records_lib.append_records(curves_path, curves)
      records_lib.append_records(results_path, results)
    progress.finish(label(setting))
    computed += 1
  return computed
