"""Full-precision matrix products for everything that must stay unitary.

On GPUs and TPUs JAX's default float32/complex64 matmul precision may use reduced
precision inputs (TF32 on NVIDIA, bf16 passes on TPU): relative errors of ~1e-3, which
would make U(λ) visibly non-unitary and its gradient disagree with expm's. The library's
own products (forming U, the spectral reverse rule, polar factors, logarithms, the
layers' U x) therefore ask for HIGHEST precision; on CPU it changes nothing.
"""

import jax
import jax.numpy as jnp

__all__ = ["matmul"]


def matmul(a, b) -> jax.Array:
  """`jnp.matmul(a, b)` at `jax.lax.Precision.HIGHEST` (shapes and dtypes as jnp.matmul)."""
  return jnp.matmul(a, b, precision=jax.lax.Precision.HIGHEST)
