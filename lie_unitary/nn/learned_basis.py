"""A flax linen layer of m unitaries that share one learned basis of u(n).

U_j = expm(Σ_a C_ja G_a), G_a = Σ_b M_ab T_b: the basis M (k, n²) is a parameter
(collection "params"), the coefficients C (m, k) of the m operators live in their own
variable collection, `COEFFICIENTS_COLLECTION`, so that an optimizer can treat them
apart (`collection_labels`). See `lie_unitary.learned_basis` and docs/learned_basis.md.
"""

from __future__ import annotations

from typing import Any
from typing import Callable

import flax.linen as nn
import jax
import jax.numpy as jnp

from lie_unitary import algebra
from lie_unitary import learned_basis
from lie_unitary.precision import matmul as mm

__all__ = ["COEFFICIENTS_COLLECTION", "LearnedBasisUnitaries", "collection_labels"]

# The flax variable collection of the operators' coefficients C (m, k).
COEFFICIENTS_COLLECTION = "coefficients"

Initializer = Callable[..., jax.Array]


def collection_labels(variables) -> Any:
  """Labels for `optax.multi_transform`: each leaf labelled by its variable collection.

  Args:
    variables: flax variables, a mapping {collection: tree}, e.g. ``{"params": ...,
      "coefficients": ...}``.

  Returns:
    The same structure with the collection's name (a string) at every leaf.
  """
  return {name: jax.tree.map(lambda _, name=name: name, tree)
          for name, tree in variables.items()}


class LearnedBasisUnitaries(nn.Module):
  """m unitaries U_j = `unitary_from_basis(C_j, M)` (n, n) sharing a learned basis M.

  Variables: ``params/basis`` M, real (k, n²), and ``coefficients/coefficients`` C,
  real (m, k), in the collection `COEFFICIENTS_COLLECTION`. All m unitaries come from
  one batched call (m eigh; the derivatives with respect to M and C are the spectral
  rule of `lie_unitary.expm`). ``layer.apply(variables)`` returns them (m, n, n);
  ``layer.apply(variables, x)`` applies U_j to x[j] in the row convention of the
  operators experiment, y[j] = x[j] @ U_jᵀ.

  Example (a faster step for the coefficients than for the shared basis)::

    layer = LearnedBasisUnitaries(n=4, num_operators=3, basis_size=6)
    variables = layer.init(jax.random.key(0))   # params/basis (6, 16), coefficients (3, 6)
    u = layer.apply(variables)                  # (3, 4, 4) complex64
    tx = optax.multi_transform({"params": optax.adam(1e-3), "coefficients": optax.adam(1e-2)},
                               collection_labels)
    state = tx.init(variables)
    grads = jax.grad(lambda v: loss(layer.apply(v, x), y))(variables)
    updates, state = tx.update(grads, state, variables)
    variables = optax.apply_updates(variables, updates)

  Attributes:
    n: matrix size, an integer ≥ 1.
    num_operators: m, an integer ≥ 1.
    basis_size: k, 1 ≤ k ≤ n² (≤ n for "toroidal").
    basis_init: a scheme of `lie_unitary.learned_basis.BASIS_INITS` ("random", the
      default: a random subspace with orthonormal rows; "standard"; "toroidal") or a
      flax initializer ``(key, (k, n²), dtype)``.
    coefficient_init: flax initializer of C (m, k); default N(0, 1), so that with a
      "random" basis of k = n² every λ_j = C_j @ M is N(0, I), the paper's init.
    param_dtype: float32 (U complex64) or float64 (complex128); half precision raises.
    method: "eigh" (default: one batch), "pade", "taylor" or "auto", as in
      `unitary_from_basis`.
  """
  n: int
  num_operators: int
  basis_size: int
  basis_init: str | Initializer = "random"
  coefficient_init: Initializer = nn.initializers.normal(stddev=1.0)
  param_dtype: Any = jnp.float32
  method: str = "eigh"

  def _basis_initializer(self) -> Initializer:
    if callable(self.basis_init):
      return self.basis_init
    scheme = self.basis_init
    if scheme not in learned_basis.BASIS_INITS:
      raise ValueError(f"basis_init must be one of {learned_basis.BASIS_INITS} or a callable; "
                       f"got {scheme!r}.")

    def initializer(key, shape, dtype=jnp.float32):
      return learned_basis.init_basis(key, self.n, shape[0], scheme, "u", dtype)

    return initializer

  @nn.compact
  def unitaries(self) -> jax.Array:
    """The m unitaries, complex (m, n, n)."""
    d = learned_basis.basis_dimension(self.n, "u")
    m = algebra.check_positive_int(self.num_operators, "num_operators")
    dtype = algebra.check_real_dtype(self.param_dtype, "param_dtype")
    basis = self.param("basis", self._basis_initializer(), (self.basis_size, d), dtype)
    coefficients = self.variable(
        COEFFICIENTS_COLLECTION, "coefficients",
        lambda: self.coefficient_init(self.make_rng("params"), (m, self.basis_size), dtype))
    if jnp.shape(coefficients.value) != (m, self.basis_size):  # else broadcast over operators
      raise ValueError(f"the coefficients must be (num_operators, basis_size) = "
                       f"{(m, self.basis_size)}; got {jnp.shape(coefficients.value)}.")
    return learned_basis.unitary_from_basis(coefficients.value, basis, self.method)

  def __call__(self, x=None):
    """The unitaries (m, n, n) if x is None, else y (m, ..., n) with y[j] = x[j] @ U_jᵀ.

    Args:
      x: None, or an array (m, ..., n), real or complex (cast to U's dtype).

    Raises:
      ValueError: if x is not (m, ..., n).
    """
    u = self.unitaries()
    if x is None:
      return u
    x = jnp.asarray(x)
    if x.ndim < 2 or x.shape[0] != self.num_operators or x.shape[-1] != self.n:
      raise ValueError(f"x must have shape (m, ..., n) = ({self.num_operators}, ..., {self.n}); "
                       f"got {x.shape=}.")
    batch = x.shape[1:-1]
    flat = x.reshape((x.shape[0], -1, self.n)).astype(u.dtype)
    return mm(flat, jnp.matrix_transpose(u)).reshape(x.shape[:1] + batch + (self.n,))
