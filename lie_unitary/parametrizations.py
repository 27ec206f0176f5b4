"""Parametrizations of U(n) (and SO(n)) behind one interface (paper §3.3).

Each `Parametrization` is a bundle of pure functions:

- ``init(key, n, dtype) -> (params, constants)``: ``params`` is a dict of REAL arrays
  (the trainable leaves: complex quantities are stored as real pairs because optax
  applies JAX's complex gradient ∂C/∂x - i∂C/∂y as is, which ascends in the imaginary
  part); ``constants`` is a dict of fixed arrays drawn at init (a permutation, a
  gradient mask). Both are vmappable over replicates.
- ``to_unitary(params, constants) -> U``: (n, n) complex (real for the orthogonal ones).
  The Lie ones use the eigh backend (``method="eigh"``), the faster one when
  replicates are vmapped, on every device.
- ``gradient_mask(params, constants)``: a pytree like ``params`` of 0/1 multipliers,
  applied to the gradient BEFORE the optimizer (`optax.masked` would pass masked
  leaves' raw gradients through, and works per leaf, not per entry).
- ``post_update(params, constants) -> params``: identity except for projection, which
  replaces the matrix by its closest unitary (orthogonal) matrix, the polar factor.
- ``num_trainable(n) -> int``: the number of coefficients that train; ValueError
  unless n is a positive integer (n ≥ 2 for so_algebra and special_unitary, as their
  ``init``).
- ``refresh(params, constants) -> (params, constants)`` or None: a change of
  coordinates that keeps U, applied by the trainer every K steps (and before the
  first): re-centring onto the principal branch, or re-basing U = U₀·expm(L(λ)) with
  the base U₀ held in ``constants`` (state, not a parameter); see
  `lie_unitary.principal_branch`.

Available (`PARAMETRIZATIONS`): ``lie_algebra`` (n² coefficients), ``lie_restricted``
(only 7n randomly chosen coefficients train, the rest keep their N(0, 1) init; paper
§3.5), ``arjovsky`` (7n), ``projection`` (2n², polar factor after each step),
``so_algebra`` (n(n-1)/2 so(n) coefficients, real SO(n)), ``projection_orthogonal``
(n², real polar factor onto O(n)) and ``special_unitary`` (n² - 1 su(n) coefficients
``"mu"``, N(0, 1) init, SU(n); see `lie_unitary.special_unitary`).

The same n² coefficients kept near the principal branch (`lie_unitary.principal_branch`;
docs/principal_branch.md): ``lie_zero_init`` (λ = 0, U = I), ``lie_haar_init`` (λ the
principal logarithm of a Haar-random unitary), ``lie_recentred`` (N(0, 1) init; λ
replaced by the coefficients of the principal logarithm of U(λ) at every refresh) and
``lie_rebased`` (N(0, 1) init; dynamic trivialization U = U₀·U(λ), with U₀ ← U and
λ ← 0 at every refresh) and ``lie_rebased_orthonormal`` (the same, with coordinates
in the orthonormal basis T_j/‖T_j‖: U = U₀·U(λ ⊘ ‖T‖), so that every coordinate
step moves U as far as a step on one entry of a free matrix).
"""

from __future__ import annotations

from typing import Any
from typing import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from lie_unitary import algebra
from lie_unitary import composition
from lie_unitary import expm
from lie_unitary import principal_branch
from lie_unitary import special_unitary
from lie_unitary.precision import matmul as mm

__all__ = ["PARAMETRIZATIONS", "Parametrization", "apply_gradient_mask", "get_parametrization",
           "polar_unitary"]

Params = dict[str, jax.Array]

# Parametrizations are vmapped over replicates, where method="auto" sees ONE matrix and
# would pick Padé for n ≥ 128 on an accelerator; eigh is the faster one for batches.
_METHOD = "eigh"


class Parametrization(NamedTuple):
  """A parametrization of unitary (or orthogonal) matrices; see the module docstring."""
  name: str
  init: Callable[..., tuple[Params, Params]]
  to_unitary: Callable[[Params, Params], jax.Array]
  gradient_mask: Callable[[Params, Params], Any]
  post_update: Callable[[Params, Params], Params]
  num_trainable: Callable[[int], int]
  is_orthogonal: bool = False
  refresh: Callable[[Params, Params], tuple[Params, Params]] | None = None


def _check_init_args(n, dtype):
  algebra.check_positive_int(n)
  return algebra.check_real_dtype(dtype, "parameter dtype")


def _ones_like(params, constants):
  del constants
  return jax.tree.map(jnp.ones_like, params)


def _identity(params, constants):
  del constants
  return params


def polar_unitary(matrix) -> jax.Array:
  """The closest unitary (orthogonal, for real input) matrix: the polar factor P Qᴴ.

  For A = P Σ Qᴴ (SVD) it returns P Qᴴ, which minimises ‖U - A‖_F over unitary U.

  Args:
    matrix: array (..., n, n), real or complex.

  Returns:
    Array of the same shape and dtype (integers: the default float dtype).

  Raises:
    ValueError: if `matrix` is not square, or half precision (no SVD in XLA).
  """
  matrix = algebra.as_square_matrix(matrix, "matrix")
  if jnp.issubdtype(matrix.dtype, jnp.inexact):
    algebra.check_real_dtype(jnp.finfo(matrix.dtype).dtype, "matrix's (real) dtype")
  p, _, qh = jnp.linalg.svd(matrix, full_matrices=False)
  return mm(p, qh)


def apply_gradient_mask(grads, mask):
  """Multiplies a gradient pytree entrywise by a 0/1 mask pytree of the same shapes.

  This is how `lie_restricted` trains only some coefficients: masked entries get a
  zero gradient before the optimizer, so no optimizer moves them. (`optax.masked`
  does not do this: its mask is per leaf, and masked leaves pass their raw gradient.)

  Args:
    grads: pytree of arrays.
    mask: pytree with the same structure and leaf shapes, real (0/1 entries; the
      values are not checked, so other values scale the gradient).

  Returns:
    The masked gradients, same structure and dtypes as `grads`.

  Raises:
    ValueError: if the structures or any leaf shapes differ, or a mask leaf is complex.
  """
  g_leaves, g_tree = jax.tree.flatten(grads)
  m_leaves, m_tree = jax.tree.flatten(mask)
  if g_tree != m_tree:
    raise ValueError(f"gradient mask structure {m_tree} does not match gradients {g_tree}.")
  for path_g, (g, m) in zip(jax.tree_util.tree_flatten_with_path(grads)[0],
                            zip(g_leaves, m_leaves)):
    if jnp.shape(g) != jnp.shape(m):
      raise ValueError(
          f"gradient mask for {jax.tree_util.keystr(path_g[0])} has shape {jnp.shape(m)}, "
          f"but the gradient has shape {jnp.shape(g)}.")
    if jnp.iscomplexobj(m):  # astype would keep its real part only
      raise ValueError(f"gradient mask for {jax.tree_util.keystr(path_g[0])} must be real; "
                       f"got dtype {jnp.result_type(m)}.")
  return jax.tree.map(lambda g, m: g * m.astype(g.dtype), grads, mask)


# lie_algebra -------------------------------------------------------------------


def _lie_init(key, n, dtype=jnp.float32):
  dtype = _check_init_args(n, dtype)
  return {"lam": jax.random.normal(key, (n * n,), dtype)}, {}


def _lie_to_unitary(params, constants):
  del constants
  return expm.unitary_from_lambdas(params["lam"], method=_METHOD)


# λ near the principal branch ----------------------------------------------------


def _lie_init_with(scheme):
  def init(key, n, dtype=jnp.float32):
    dtype = _check_init_args(n, dtype)
    return {"lam": principal_branch.init_lambdas(key, n, scheme, dtype=dtype)}, {}
  return init


def _recentre(params, constants):
  return {"lam": principal_branch.principal_lambdas(params["lam"])}, constants


def _rebased_init(key, n, dtype=jnp.float32):
  params, _ = _lie_init(key, n, dtype)
  cplx = jnp.result_type(params["lam"].dtype, jnp.complex64)
  return params, {"base": jnp.eye(n, dtype=cplx)}


def _rebased_to_unitary(params, constants):
  return principal_branch.rebased_unitary(constants["base"], params["lam"], method=_METHOD)


def _rebase(params, constants):
  base, lam = principal_branch.rebase(constants["base"], params["lam"], method=_METHOD)
  return {"lam": lam}, {**constants, "base": base}


def _orthonormal_init(key, n, dtype=jnp.float32):
  params, constants = _rebased_init(key, n, dtype)
  scale = 1.0 / principal_branch.basis_norms(n, params["lam"].dtype)
  # The same initial U as lie_rebased: the coordinates are λ ⊙ ‖T‖.
  return {"lam": params["lam"] / scale}, {**constants, "scale": scale}


def _orthonormal_to_unitary(params, constants):
  return _rebased_to_unitary({"lam": params["lam"] * constants["scale"]}, constants)


def _orthonormal_rebase(params, constants):
  new, constants = _rebase({"lam": params["lam"] * constants["scale"]}, constants)
  return new, constants


# lie_restricted -----------------------------------------------------------------


def _restricted_init(key, n, dtype=jnp.float32):
  dtype = _check_init_args(n, dtype)
  k_lam, k_mask = jax.random.split(key)
  num = min(7 * n, n * n)
  chosen = jax.random.choice(k_mask, n * n, (num,), replace=False)
  mask = jnp.zeros((n * n,), dtype).at[chosen].set(1.0)
  return {"lam": jax.random.normal(k_lam, (n * n,), dtype)}, {"mask": mask}


def _restricted_mask(params, constants):
  del params
  return {"lam": constants["mask"]}


# arjovsky ------------------------------------------------------------------------


def _arjovsky_init(key, n, dtype=jnp.float32):
  dtype = _check_init_args(n, dtype)
  k_ang, k_re, k_im, k_perm = jax.random.split(key, 4)
  params = {
      "angles": jax.random.normal(k_ang, (3, n), dtype),
      "reflections_re": jax.random.normal(k_re, (2, n), dtype),
      "reflections_im": jax.random.normal(k_im, (2, n), dtype),
  }
  return params, {"permutation": jax.random.permutation(k_perm, n).astype(jnp.int32)}


def _arjovsky_to_unitary(params, constants):
  return composition.arjovsky_unitary(params["angles"], params["reflections_re"],
                                      params["reflections_im"], constants["permutation"])


# projection ----------------------------------------------------------------------


def _projection_init(key, n, dtype=jnp.float32):
  dtype = _check_init_args(n, dtype)
  k_re, k_im = jax.random.split(key)
  # As the original code: a complex N(0,1) + iN(0,1) matrix, not projected before step 1.
  return {"re": jax.random.normal(k_re, (n, n), dtype),
          "im": jax.random.normal(k_im, (n, n), dtype)}, {}


def _projection_matrix(params):
  """re + i·im, the two of one shape (lax.complex would broadcast a unit axis)."""
  re, im = jnp.asarray(params["re"]), jnp.asarray(params["im"])
  if re.shape != im.shape:
    raise ValueError(f"projection's 're' and 'im' must have one shape; got {re.shape} and "
                     f"{im.shape}.")
  return jax.lax.complex(re, im)


def _projection_to_unitary(params, constants):
  del constants
  return _projection_matrix(params)


def _projection_post_update(params, constants):
  del constants
  u = polar_unitary(_projection_matrix(params))
  return {"re": jnp.real(u), "im": jnp.imag(u)}


# so(n) and O(n) -------------------------------------------------------------------


def _so_init(key, n, dtype=jnp.float32):
  dtype = _check_init_args(n, dtype)
  if n < 2:
    raise ValueError(f"so(n) needs n ≥ 2; got {n=}.")
  return {"mu": jax.random.normal(key, (n * (n - 1) // 2,), dtype)}, {}


def _so_to_orthogonal(params, constants):
  del constants
  return expm.orthogonal_from_lambdas(params["mu"], method=_METHOD)


def _projection_orthogonal_init(key, n, dtype=jnp.float32):
  dtype = _check_init_args(n, dtype)
  return {"matrix": jax.random.normal(key, (n, n), dtype)}, {}


def _projection_orthogonal_to_matrix(params, constants):
  del constants
  return params["matrix"]


def _projection_orthogonal_post_update(params, constants):
  del constants
  return {"matrix": polar_unitary(params["matrix"])}


# su(n) and SU(n) ------------------------------------------------------------------


def _su_init(key, n, dtype=jnp.float32):
  dtype = _check_init_args(n, dtype)
  if n < 2:
    raise ValueError(f"su(n) needs n ≥ 2; got {n=}.")
  return {"mu": jax.random.normal(key, (n * n - 1,), dtype)}, {}


def _su_to_unitary(params, constants):
  del constants
  return special_unitary.special_unitary_from_lambdas(params["mu"], method=_METHOD)


def _count(formula, least: int = 1):
  """`formula` as a `num_trainable`: n checked first (a negative or float n has no count;
  nor an n below `least`, which `init` refuses)."""
  def count(n):
    if algebra.check_positive_int(n) < least:
      raise ValueError(f"this parametrization needs n ≥ {least}; got {n}.")
    return formula(int(n))
  return count


PARAMETRIZATIONS: dict[str, Parametrization] = {
    p.name: p for p in (
        Parametrization("lie_algebra", _lie_init, _lie_to_unitary, _ones_like, _identity,
                        _count(lambda n: n * n)),
        Parametrization("lie_restricted", _restricted_init, _lie_to_unitary, _restricted_mask,
                        _identity, _count(lambda n: min(7 * n, n * n))),
        Parametrization("arjovsky", _arjovsky_init, _arjovsky_to_unitary, _ones_like,
                        _identity, _count(lambda n: 7 * n)),
        Parametrization("projection", _projection_init, _projection_to_unitary, _ones_like,
                        _projection_post_update, _count(lambda n: 2 * n * n)),
        Parametrization("so_algebra", _so_init, _so_to_orthogonal, _ones_like, _identity,
                        _count(lambda n: n * (n - 1) // 2, least=2), is_orthogonal=True),
        Parametrization("projection_orthogonal", _projection_orthogonal_init,
                        _projection_orthogonal_to_matrix, _ones_like,
                        _projection_orthogonal_post_update, _count(lambda n: n * n),
                        is_orthogonal=True),
        Parametrization("special_unitary", _su_init, _su_to_unitary, _ones_like, _identity,
                        _count(lambda n: n * n - 1, least=2)),
        Parametrization("lie_zero_init", _lie_init_with("zeros"), _lie_to_unitary, _ones_like,
                        _identity, _count(lambda n: n * n)),
        Parametrization("lie_haar_init", _lie_init_with("haar"), _lie_to_unitary, _ones_like,
                        _identity, _count(lambda n: n * n)),
        Parametrization("lie_recentred", _lie_init, _lie_to_unitary, _ones_like, _identity,
                        _count(lambda n: n * n), refresh=_recentre),
        Parametrization("lie_rebased", _rebased_init, _rebased_to_unitary, _ones_like,
                        _identity, _count(lambda n: n * n), refresh=_rebase),
        Parametrization("lie_rebased_orthonormal", _orthonormal_init, _orthonormal_to_unitary,
                        _ones_like, _identity, _count(lambda n: n * n),
                        refresh=_orthonormal_rebase),
    )
}


def get_parametrization(name: str) -> Parametrization:
  """Looks up a parametrization by name.

  Args:
    name: one of ``PARAMETRIZATIONS`` ("lie_algebra", "lie_restricted", "arjovsky",
      "projection", "so_algebra", "projection_orthogonal", "special_unitary",
      "lie_zero_init", "lie_haar_init", "lie_recentred", "lie_rebased",
      "lie_rebased_orthonormal").

  Returns:
    The `Parametrization`.

  Raises:
    ValueError: for an unknown name.
  """
  try:
    return PARAMETRIZATIONS[name]
  except (KeyError, TypeError):
    raise ValueError(
        f"unknown parametrization {name!r}; expected one of {tuple(PARAMETRIZATIONS)}.") from None
