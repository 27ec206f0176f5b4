"""Rebasing: move a rebased layer's or cell's base to its current point, W₀ ← W, μ ← 0.

A rebased square layer (``OrthogonalLinear(n, rebased=True)``, ``UnitaryLinear``) or cell
(``GURNNCell(rebased=True)``) computes W = W₀ · expm(A(μ)) with the base W₀ in the
variable collection `BASE_COLLECTION`. Its exponential is cheapest near μ = 0; rebasing
now and then (every few hundred steps, say) keeps μ there without changing W.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp

from lie_unitary import expm
from lie_unitary import principal_branch
from lie_unitary.nn.weights import BASE_COLLECTION
from lie_unitary.precision import matmul as mm

__all__ = ["rebase"]

_COEFFICIENTS = ("mu", "lam")


def rebase(variables: dict[str, Any]) -> dict[str, Any]:
  """The same maps with every base moved to its current point and its coefficients zeroed.

  For every module with a base (``variables[BASE_COLLECTION][...]["base"]``) and its
  coefficients at the same path in ``variables["params"]`` (``mu`` real, with a real base;
  ``lam``, with a complex base): W₀ ← W₀ · expm(A), re-orthonormalized by one
  Newton–Schulz step (`lie_unitary.principal_branch.reunitarize`) so that rounding does
  not accumulate, and the coefficients ← 0. Jittable. Reset the optimizer's moments of
  those coefficients after it (`lie_unitary.principal_branch.reset_optimizer_state`):
  they refer to the old chart.

  Args:
    variables: a flax variables dict holding "params" and `BASE_COLLECTION`; other
      collections pass through unchanged.

  Returns:
    A new variables dict of the same structure, shapes and dtypes.

  Raises:
    ValueError: if there is no `BASE_COLLECTION` or either collection is not a dict, a
      module with bases has no counterpart in "params", a base has no "mu" or "lam"
      beside it, or its dtype or shape does not match them (complex with "lam", real
      with "mu").
  """
  if BASE_COLLECTION not in variables:
    raise ValueError(f"rebase: the variables have no {BASE_COLLECTION!r} collection (no "
                     f"rebased layer or cell); collections: {sorted(variables)}.")
  for name in ("params", BASE_COLLECTION):
    if not isinstance(variables.get(name), Mapping):
      raise ValueError(f"rebase: variables[{name!r}] must be a dict of the modules' variables; "
                       f"got {type(variables.get(name)).__name__}.")
  params, bases = dict(variables["params"]), dict(variables[BASE_COLLECTION])

  def visit(base_tree, param_tree, path):
    for name, sub in base_tree.items():
      if name == "base":
        found = [c for c in _COEFFICIENTS if c in param_tree]
        if not found:
          raise ValueError(f"rebase: the base at {'/'.join(path) or '/'} has no 'mu' or 'lam' "
                           "beside it in 'params'.")
        c = found[0]
        coeffs = param_tree[c]
        if jnp.iscomplexobj(sub) != (c == "lam"):  # U(n): complex base; SO(n): real
          raise ValueError(f"rebase: the base at {'/'.join(path) or '/'} is "
                           f"{jnp.asarray(sub).dtype} beside {c!r}: 'lam' needs a complex "
                           f"base, 'mu' a real one.")
        if c == "lam":  # U(n): the cells' own rebase
          base_tree["base"], param_tree[c] = principal_branch.rebase(sub, coeffs)
        else:
          r = expm.orthogonal_from_lambdas(coeffs)
          if r.shape[-2:] != jnp.shape(sub)[-2:]:
            raise ValueError(f"rebase: 'mu' at {'/'.join(path) or '/'} makes a "
                             f"{r.shape[-1]}×{r.shape[-1]} rotation beside a base of shape "
                             f"{jnp.shape(sub)}.")
          base_tree["base"] = principal_branch.reunitarize(mm(jnp.asarray(sub).astype(r.dtype), r))
          param_tree[c] = jnp.zeros_like(coeffs)
      else:
        if not isinstance(param_tree.get(name), Mapping) or not isinstance(sub, Mapping):
          raise ValueError(f"rebase: {'/'.join(path + (name,))} holds bases but no module of "
                           "that name in 'params' (or not a dict of variables).")
        base_tree[name] = dict(sub)
        param_tree[name] = dict(param_tree[name])
        visit(base_tree[name], param_tree[name], path + (name,))

  visit(bases, params, ())
  return {**variables, "params": params, BASE_COLLECTION: bases}
