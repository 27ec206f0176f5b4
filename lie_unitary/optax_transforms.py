"""optax pieces for the parametrizations: entrywise gradient masks and the polar projection.

`lie_unitary.parametrizations` describes each parametrization by pure functions and
leaves the optimizer to the caller: a gradient mask applied before it
(``lie_restricted``) and a projection after the step (``projection``,
``projection_orthogonal``). The two transformations here put both into an ordinary
`optax.GradientTransformation` chain, so the training loop is plain optax::

    p = lu.get_parametrization("lie_restricted")
    params, constants = p.init(key, n)
    mask = p.gradient_mask(params, constants)
    opt = optax.chain(lu.entrywise_gradient_mask(mask), optax.rmsprop(1e-3))

    p = lu.get_parametrization("projection")            # {"re": (n, n), "im": (n, n)}
    opt = optax.chain(optax.rmsprop(1e-3), lu.polar_projection("real_pair"))

Complex parameters (why every trainable leaf here is real). For a real loss C of
z = x + iy, ``jax.grad`` returns ∂C/∂x - i ∂C/∂y, the complex conjugate of the
steepest-ascent direction ∂C/∂x + i ∂C/∂y (= 2 ∂C/∂z̄). optax applies whatever it is
given as is, so a step ``z - lr·g`` descends in x but ASCENDS in y. This library stores complex
quantities as real pairs [Re, Im] (``{"re", "im"}`` leaves, or [Re x, Im x] halves),
whose gradients are the real partial derivatives, so every optax optimizer descends.
The alternative, `optax.contrib.split_real_and_imaginary(inner)`, keeps complex
parameters and runs `inner` on their real and imaginary parts separately (each part
gets its own optimizer statistics, exactly as real pairs do), but it does NOT conjugate
the gradient: pass it ``jax.tree.map(jnp.conj, grads)``, or it ascends in y too. See
docs/optax.md.
"""

from __future__ import annotations

from typing import Any
from typing import Callable
from typing import NamedTuple
from typing import Union

import jax
import jax.numpy as jnp
import optax

from lie_unitary import parametrizations

__all__ = ["MatrixLayout", "entrywise_gradient_mask", "polar_projection"]


def entrywise_gradient_mask(mask) -> optax.GradientTransformation:
  """Multiplies updates entrywise by a fixed 0/1 mask: masked entries get no update.

  Chained BEFORE an optimizer, ``optax.chain(entrywise_gradient_mask(mask), opt)``, it
  is `lie_unitary.parametrizations.apply_gradient_mask` followed by ``opt``: the
  optimizer sees zero gradient at masked entries, so no optimizer moves them (its
  statistics there stay at their initial values). This is the ``lie_restricted``
  training rule. `optax.masked` differs: its mask is one boolean per LEAF, and leaves
  masked out pass their raw gradient through untransformed.

  Args:
    mask: pytree with the structure and leaf shapes of the parameters; entries 0 or 1
      (any real dtype; cast to each update's dtype). E.g. ``p.gradient_mask(params,
      constants)``. It may be a traced value (e.g. one replicate's mask under vmap).

  Returns:
    An `optax.GradientTransformation` with empty state; ``update`` ignores params.

  Raises:
    ValueError: from ``init`` or ``update``, if the structure or a leaf shape of the
      mask differs from the parameters' / updates'.
  """

  def init_fn(params):
    parametrizations.apply_gradient_mask(params, mask)  # validates early, result unused
    return optax.EmptyState()

  def update_fn(updates, state, params=None):
    del params
    return parametrizations.apply_gradient_mask(updates, mask), state

  return optax.GradientTransformation(init_fn, update_fn)


class MatrixLayout(NamedTuple):
  """Where the matrices are in a parameter pytree, for `polar_projection`.

  Attributes:
    to_matrices: params -> pytree of square arrays (..., n, n), real or complex.
    from_matrices: that pytree (after projection) -> params, the inverse of
      `to_matrices`; its result must have the structure and leaf shapes of params.
  """
  to_matrices: Callable[[Any], Any]
  from_matrices: Callable[[Any], Any]


def _check_real_pair(params):
  if not isinstance(params, dict) or set(params) != {"re", "im"}:
    keys = sorted(params) if isinstance(params, dict) else type(params).__name__
    raise ValueError(
        f"layout 'real_pair' needs params {{'re': (..., n, n), 'im': (..., n, n)}} (the "
        f"`projection` parametrization); got {keys}.")
  re, im = jnp.asarray(params["re"]), jnp.asarray(params["im"])
  if (re.shape != im.shape or re.dtype != im.dtype
      or re.dtype not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64))):
    raise ValueError(
        f"layout 'real_pair' needs 're' and 'im' of one shape and one dtype, float32 or "
        f"float64; got {re.shape} {re.dtype} and {im.shape} {im.dtype}.")
  return re, im


def _real_pair_to_matrix(params):
  return jax.lax.complex(*_check_real_pair(params))


def _matrix_to_real_pair(matrix):
  return {"re": jnp.real(matrix), "im": jnp.imag(matrix)}


_LAYOUTS = {
    # Every leaf is a matrix: real -> orthogonal polar factor, complex -> unitary.
    "matrices": MatrixLayout(lambda params: params, lambda matrices: matrices),
    # The `projection` parametrization's {"re", "im"} real pair holds one complex matrix.
    "real_pair": MatrixLayout(_real_pair_to_matrix, _matrix_to_real_pair),
}


def _resolve_layout(layout) -> MatrixLayout:
  if isinstance(layout, MatrixLayout):
    return layout
  if isinstance(layout, str) and layout in _LAYOUTS:
    return _LAYOUTS[layout]
  raise ValueError(
      f"layout must be one of {tuple(_LAYOUTS)} or a MatrixLayout; got {layout!r}.")


def _matrices(layout: MatrixLayout, params):
  """`layout.to_matrices(params)`, checked to be square float or complex arrays of
  single or double precision."""
  matrices = layout.to_matrices(params)
  for path, m in jax.tree_util.tree_flatten_with_path(matrices)[0]:
    dtype = jnp.result_type(m)
    if (jnp.ndim(m) < 2 or jnp.shape(m)[-1] != jnp.shape(m)[-2]
        or not jnp.issubdtype(dtype, jnp.inexact)
        or jnp.finfo(dtype).dtype not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64))):
      raise ValueError(
          f"polar_projection: matrix {jax.tree_util.keystr(path) or '(root)'} must be a "
          f"square float or complex array (..., n, n) of single or double precision; got "
          f"shape {jnp.shape(m)}, dtype {dtype}.")
  return matrices


def _params(layout: MatrixLayout, matrices, like):
  """`layout.from_matrices(matrices)`, checked to have the structure and shapes of `like`."""
  params = layout.from_matrices(matrices)
  want, got = jax.tree.structure(like), jax.tree.structure(params)
  if want != got:
    raise ValueError(
        f"polar_projection: from_matrices returned structure {got}, but params have {want}.")
  for (path, p), q in zip(jax.tree_util.tree_flatten_with_path(like)[0], jax.tree.leaves(params)):
    if jnp.shape(p) != jnp.shape(q):
      raise ValueError(
          f"polar_projection: from_matrices returned shape {jnp.shape(q)} for "
          f"{jax.tree_util.keystr(path)}, whose parameter has shape {jnp.shape(p)}.")
  return params


def _check_updates_like_params(updates, params):
  """Updates shaped as params: params + updates would broadcast a mismatch silently."""
  if jax.tree.structure(updates) != jax.tree.structure(params):
    raise ValueError(f"polar_projection: updates have structure {jax.tree.structure(updates)}, "
                     f"but params have {jax.tree.structure(params)}.")
  for (path, p), u in zip(jax.tree_util.tree_flatten_with_path(params)[0],
                          jax.tree.leaves(updates)):
    if jnp.shape(p) != jnp.shape(u):
      raise ValueError(f"polar_projection: the update for {jax.tree_util.keystr(path)} has "
                       f"shape {jnp.shape(u)}, its parameter {jnp.shape(p)}.")


def polar_projection(
    layout: Union[str, MatrixLayout] = "matrices") -> optax.GradientTransformation:
  """Rewrites updates so that the step lands on the polar factor of params + updates.

  updates' = polar(params + updates) - params, where polar(A) = P Qᴴ for A = P Σ Qᴴ is
  the closest unitary (orthogonal, for real A) matrix (`polar_unitary`). Chain it
  LAST, ``optax.chain(optax.sgd(lr), polar_projection("real_pair"))``: the step then
  equals the `projection` parametrization's ``post_update(params + step)``, and the
  inner optimizer's statistics see the raw gradients, as in the original code.

  Round-off: ``optax.apply_updates(params, updates')`` computes params + (polar -
  params) in floating point, which can differ from the polar factor by about one ulp
  of max(|params|, |polar|) per entry (a few 1e-16 in float64, 1e-7 in float32), so
  the result is unitary to that accuracy rather than to the SVD's. Apply
  ``post_update`` (or `polar_unitary`) directly where exact polar factors matter.

  Args:
    layout: which parts of params are matrices:
      ``"matrices"``: every leaf is a square (..., n, n) matrix, real (projected onto
      O(n), e.g. ``projection_orthogonal``'s ``{"matrix": ...}``) or complex (onto
      U(n));
      ``"real_pair"``: params are ``{"re": (..., n, n), "im": (..., n, n)}``, real and
      imaginary parts of one complex matrix (the ``projection`` parametrization);
      or a `MatrixLayout` of your own ``to_matrices`` / ``from_matrices``.

  Returns:
    An `optax.GradientTransformation` with empty state. Its ``update`` needs params.
    Updates keep their dtypes.

  Raises:
    ValueError: for an unknown layout; from ``update`` if params is None or updates
      differ from params in structure or a leaf's shape; from ``init`` or ``update``
      if a matrix is not square or not float/complex of single or double precision,
      the 'real_pair' keys are not exactly 're' and 'im' or their parts differ in
      dtype, or ``from_matrices`` does not return the params'
      structure and shapes.
  """
  layout = _resolve_layout(layout)

  def init_fn(params):
    _params(layout, _matrices(layout, params), params)  # validates the layout early
    return optax.EmptyState()

  def update_fn(updates, state, params=None):
    if params is None:
      raise ValueError(
          "polar_projection needs the current params: call update(updates, state, params).")
    _check_updates_like_params(updates, params)
    stepped = optax.apply_updates(params, updates)
    polar = jax.tree.map(parametrizations.polar_unitary, _matrices(layout, stepped))
    projected = _params(layout, polar, params)
    new_updates = jax.tree.map(lambda q, p, u: (q - p).astype(jnp.result_type(u)),
                               projected, params, updates)
    return new_updates, state

  return optax.GradientTransformation(init_fn, update_fn)
