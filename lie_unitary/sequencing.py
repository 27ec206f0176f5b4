"""Ordering LAPACK calls on CPU: at most one batched decomposition in flight.

jaxlib's CPU LAPACK kernels (eigh, qr, svd, lu) split a batch over XLA's intra-op
thread pool and block until it is done; two such kernels running at once on a
2-thread pool can wait on each other forever (seen here at n ≥ 14 with 9-18
replicates, and in a vmapped program with two independent eighs). Making each call
data-dependent on the previous one's output keeps at most one in flight.
`lax.optimization_barrier` is NOT enough: XLA removes it before the CPU runtime
schedules its thunks.
"""

import jax
import jax.numpy as jnp

__all__ = ["after"]


def after(value, *deps):
  """`value`, made data-dependent on `deps` so it is computed only after them.

  Every leaf of `value` gets a zero added that XLA cannot prove to be zero:
  [Σ|deps| < -1], false for any real input (NaN included). PRNG keys are supported.

  Args:
    value: a pytree of arrays (or typed PRNG keys).
    *deps: pytrees of real or complex arrays that must be computed first.

  Returns:
    `value`, numerically unchanged, with the same structure and dtypes.
  """
  leaves = jax.tree.leaves(deps)
  if not leaves:
    return value
  flag = sum(jnp.sum(jnp.abs(d)) for d in leaves) < -1

  def add(x):
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
      data = jax.random.key_data(x)
      return jax.random.wrap_key_data(data + flag.astype(data.dtype),
                                      impl=jax.random.key_impl(x))
    return x + flag.astype(x.dtype)

  return jax.tree.map(add, value)
