"""The paper's per-parameter derivative of U(λ) (eqs. 11-13, appendix A), for reference.

dU/dλ_a = W V_a Wᴴ, V_a = (Wᴴ T_a W) ∘ F, for every a = 1..n²: O(n⁵) time and O(n⁴)
memory. The library differentiates with the O(n³) reverse rule in `expm.py`
instead; this module exists to benchmark against and to test that both agree.
Using the sinc form of F (see `expm.py`) it is finite at repeated eigenvalues too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from lie_unitary import algebra
from lie_unitary.precision import matmul as mm

__all__ = ["gradient_from_jacobian", "paper_gradient", "paper_jacobian",
           "paper_unitary_and_jacobian"]


def paper_jacobian(lam) -> jax.Array:
  """All n² derivative matrices dU/dλ_a, computed as the paper does.

  Wᴴ T_a W uses the paper's outer-product forms (appendix A) for the three blocks.

  Args:
    lam: real array (n²,).

  Returns:
    Complex array (n², n, n); entry a is dU/dλ_a.

  Raises:
    ValueError: if `lam` is complex, not rank 1, or its length is not a perfect square.
  """
  return paper_unitary_and_jacobian(lam)[1]


def paper_unitary_and_jacobian(lam) -> tuple[jax.Array, jax.Array]:
  """U(λ) and all dU/dλ_a from ONE eigh, as the paper's pipeline computes them.

  One eigh also matters on CPU: two independent batched LAPACK calls in one program
  can deadlock jaxlib's intra-op thread pool (docs/cpu_notes.md).

  Args:
    lam: real array (n²,).

  Returns:
    (U, jac): complex (n, n) and (n², n, n).

  Raises:
    ValueError: as `paper_jacobian`.
  """
  lam = jnp.asarray(lam)
  if lam.ndim != 1:
    raise ValueError(f"lam must have shape (n²,); got {lam.shape=}.")
  skew = algebra.lambdas_to_skew_hermitian(lam)
  n = skew.shape[-1]
  theta, w = jnp.linalg.eigh(1j * skew)
  half_sum = 0.5 * (theta[:, None] + theta[None, :])
  sinc = jnp.sinc(0.5 * (theta[:, None] - theta[None, :]) / jnp.pi)
  f = jnp.exp(-1j * half_sum) * sinc
  rows, cols = jnp.triu_indices(n, 1)
  wc = jnp.conj(w)
  # (Wᴴ T W)_ij for T = e_r e_sᵀ is conj(W_ri) W_sj: rows r of W are the paper's w_r.
  outer = lambda r, s: wc[r][..., :, None] * w[s][..., None, :]
  diag = 1j * outer(jnp.arange(n), jnp.arange(n))
  sym = 1j * (outer(cols, rows) + outer(rows, cols))
  anti = outer(rows, cols) - outer(cols, rows)
  v = jnp.concatenate([diag, sym, anti], axis=0) * f[None]
  u = mm(w * jnp.exp(-1j * theta)[None, :], jnp.conj(w.T))
  return u, mm(mm(w, v), jnp.conj(w.T))


def gradient_from_jacobian(jac, cotangent) -> jax.Array:
  """∂C/∂λ_a = Re Σ_ij Ḡ_ij (dU/dλ_a)_ij for JAX's cotangent Ḡ of U (∂C/∂Re U - i ∂C/∂Im U).

  Args:
    jac: complex (n², n, n), from `paper_jacobian`.
    cotangent: complex (n, n).

  Returns:
    Real array (n²,).
  """
  return jnp.real(jnp.einsum("aij,ij->a", jac, jnp.asarray(cotangent)))


def paper_gradient(lam, cotangent) -> jax.Array:
  """∂C/∂λ for a real loss C of U(λ) from the per-parameter Jacobian.

  Args:
    lam: real array (n²,).
    cotangent: complex (n, n), JAX's cotangent of U (∂C/∂Re U - i ∂C/∂Im U).

  Returns:
    Real array (n²,).
  """
  return gradient_from_jacobian(paper_jacobian(lam), cotangent)
