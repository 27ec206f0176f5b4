"""Plain `lax.scan` loops that the recurrence kernels' tests take as references."""

import jax
import jax.numpy as jnp


def modrelu_pairs_scan(w, h0, p, bias, eps=1e-5):
  """h_t = modReLU(h_{t-1} @ w + p_t) on [Re | Im] pairs, written out: (L, B, 2n)."""
  n = bias.shape[0]

  def body(h, p_t):
    a = h @ w + p_t
    x, y = a[:, :n], a[:, n:]
    r = jnp.sqrt(x * x + y * y + eps)
    # modReLU's derivative at z = 0 exactly is taken as 0 (its output is 0 there).
    s = jnp.where((x != 0) | (y != 0), jnp.maximum(r + bias, 0.0) / r, 0.0)
    h = jnp.concatenate([s * x, s * y], -1)
    return h, h

  return jax.lax.scan(body, h0, p)[1]
