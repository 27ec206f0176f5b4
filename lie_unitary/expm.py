"""expm of a skew-Hermitian matrix: one eigh with an O(n³) spectral derivative, or Padé.

Forward: iK is Hermitian for K = (L - Lᴴ)/2, so eigh(iK) = W diag(θ) Wᴴ gives
K = W diag(-iθ) Wᴴ and U = expm(K) = W diag(e^{-iθ}) Wᴴ.

Derivative (Daleckii–Krein): dU = W (F ∘ (Wᴴ dK W)) Wᴴ with
F_ij = (e^{d_i} - e^{d_j}) / (d_i - d_j), d = -iθ; written in θ it is

    F_ij = e^{-i(θ_i + θ_j)/2} · sinc(Δ_ij / 2),  Δ_ij = θ_i - θ_j,

which is exact and finite for equal eigenvalues (K = 0 has all of them equal).
With p = e^{-iθ/2}, Wp = W diag(p) and Wq = conj(W) diag(p) the phases of F ride on
Wp and Wq: U = Wp Wqᵀ and

    dU = Wp (S ∘ (Wᴴ dK W)) Wqᵀ,  S_ij = sinc(Δ_ij / 2) (real),

four n×n matmuls and one Hadamard product, O(n³) time and O(n²) memory, against the
paper's O(n⁵) per-parameter rule. This is the tangent rule of a `jax.custom_jvp`, so
forward mode (`jvp`, `jacfwd`, `linearize`) uses it directly, and reverse mode
(`grad`, `vjp`, `jacrev`) uses its transpose, which JAX derives: for JAX's cotangent
convention (Ḡ = ∂C/∂Re U - i ∂C/∂Im U) it is K̄ = conj(W) [(Wpᵀ Ḡ Wq) ∘ S] Wᵀ, again
four matmuls, the same program a hand-written reverse rule would run.

`unitary_from_lambdas` builds the tangent dK = L(dλ) by scattering the three blocks of
dλ (diagonal, symmetric, antisymmetric; every entry to its own places in L) into
zeros: the transpose, which reverse mode runs, is one gather per block reading
λ̄_j = Re Σ K̄ ∘ T_j straight out of K̄, as `algebra.cotangent_to_lambdas` does.
(Building dK with the gather that forms L(λ) would make reverse mode run scatter-adds
instead, slower for batches: docs/benchmarks.md, "What the profile showed".) The
matmuls of the tangent are associated right to left so that their transpose runs left
to right: reverse mode then computes the same numbers as a hand-written reverse rule of
that order (bitwise, where checked: float32 on CPU, jitted and vmapped).

First derivatives, in both modes, are exact and finite everywhere. Higher derivatives
(`hessian`, second-order `check_grads`) differentiate the tangent rule itself, which
goes through eigh's own derivative, and that divides by θ_i - θ_j: exact for distinct
eigenvalues, but the relative error grows like ε/gap as two eigenvalues approach each
other (docs/benchmarks.md, "Second derivatives near repeated eigenvalues"), and at a
repeated eigenvalue the result is NaN (λ = 0, where they are exactly equal) or wrong
(equal up to rounding). Use method="pade" for second derivatives at or near repeated
eigenvalues.

The backend "pade" is `jax.scipy.linalg.expm` (Padé approximant with scaling and
squaring) differentiated by JAX in both modes; `choose_method` picks between it and
"eigh" for `method="auto"` (docs/benchmarks.md, "Choosing a backend", has the timings).

The backend "taylor" is for matrices near 0, as in a trivialized (rebased) layer
W = W₀ · expm(A) between rebasings: it picks, at run time from ‖A‖₁, the lowest
Taylor degree m in (1, 2, 4, 6, 8, 12, 18) that is exact to the unit roundoff u in
value AND first derivative, and falls back to Padé above the last threshold. For
skew-symmetric or skew-Hermitian A, ‖A‖₂ ≤ √(‖A‖₁‖A‖∞) = ‖A‖₁ and ‖expm(A)‖₂ = 1, so
the value's truncation error is at most Σ_{j>m} ‖A‖₁ʲ/j!, and the derivative's (the
derivative of the dropped terms, in a direction E) at most Σ_{j≥m} ‖A‖₁ʲ/j! · ‖E‖:
the thresholds θ_m solve Σ_{j≥m} θʲ/j! = u (float32: 6e-8, 3.5e-4, 0.035, 0.19,
0.47, 1.31, 2.97). The polynomial costs 0, 1, 2, 3, 4, 5 or 7 products
(Paterson–Stockmeyer), against Padé's six or more and its solve: at A = 0 the
exponential is I + A, no product at all. JAX differentiates the branch taken, in
both modes. One branch is chosen for a whole batch (from the largest norm); under
`jax.vmap` over matrices `lax.switch` runs every branch, so vmapped sweeps should
pass "eigh" or "pade".
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from lie_unitary import algebra
from lie_unitary.precision import matmul as mm

__all__ = ["METHODS", "check_method", "choose_method", "expm_skew_hermitian",
           "expm_skew_symmetric", "orthogonal_from_lambdas", "unitary_from_lambdas"]

METHODS = ("auto", "eigh", "pade", "taylor")

# GPU/TPU: Padé for ONE matrix from this size on.
_ACCELERATOR_PADE_MIN_N = 128
# CPU: Padé for ONE real matrix from this size on (it runs on the real matrix, while
# eigh needs the complex i·A).
_CPU_REAL_PADE_MIN_N = 16


def choose_method(n: int, batch_size: int = 1, backend: str | None = None,
                  real: bool = False) -> str:
  """The backend `method="auto"` uses for a (batch_size, n, n) input: "eigh" or "pade".

  A static rule (Python ints, decided at trace time):

  - A batch (batch_size > 1): "eigh", on every backend.
  - One matrix on CPU: "eigh"; for a real skew-symmetric one (``real=True``:
    `orthogonal_from_lambdas`, `expm_skew_symmetric`) "pade" from n ≥ 16 on.
  - One matrix on GPU/TPU (any backend but CPU): "pade" from n ≥ 128 on, else "eigh",
    complex or real.

  Under `jax.vmap` a map sees ONE matrix, so "auto" decides as for batch_size 1: pass
  method="eigh" explicitly when vmapping matrices of n ≥ 128 on an accelerator, or
  real ones of n ≥ 16 (the library's parametrizations and experiments do).

  The thresholds come from timings of `jax.value_and_grad` and `jax.jvp` through the
  maps; docs/benchmarks.md, "Choosing a backend", has the measurements, the commands,
  and what was not measured.

  Args:
    n: matrix size, an integer ≥ 1.
    batch_size: number of matrices (the product of the leading axes), an integer ≥ 1.
    backend: "cpu", "gpu", "tpu", ...; default `jax.default_backend()`.
    real: whether the matrices are real skew-symmetric (the orthogonal maps).

  Returns:
    "eigh" or "pade".

  Raises:
    ValueError: if n or batch_size is not a positive integer.
  """
  n, batch_size = algebra.check_positive_int(n), algebra.check_positive_int(batch_size,
                                                                          "batch_size")
  backend = jax.default_backend() if backend is None else backend
  if batch_size > 1:
    return "eigh"
  if backend == "cpu":
    return "pade" if real and n >= _CPU_REAL_PADE_MIN_N else "eigh"
  return "pade" if n >= _ACCELERATOR_PADE_MIN_N else "eigh"


def check_method(method) -> str:
  """Checks a ``method`` argument of the maps: one of `METHODS`.

  Args:
    method: "auto", "eigh", "pade" or "taylor".

  Returns:
    `method`, unchanged.

  Raises:
    ValueError: if `method` is not one of `METHODS` (a non-string included).
  """
  if not isinstance(method, str) or method not in METHODS:
    raise ValueError(f"method must be one of {METHODS}; got {method!r}.")
  return method


def _resolve_method(method, shape, real=False) -> str:
  """"eigh" or "pade" for an input whose matrices are (..., n, n) with `shape`."""
  check_method(method)
  if method == "auto":
    # An empty batch or 0 × 0 matrices compute nothing: any method, as an explicit one
    # returns them, without blaming a batch_size or an n of 0.
    if shape[-1] == 0:
      return "eigh"
    return choose_method(shape[-1], max(math.prod(shape[:-2]), 1), real=real)
  return method


def _pade(skew) -> jax.Array:
  """`jax.scipy.linalg.expm` with full-precision products (see lie_unitary.precision)."""
  with jax.default_matmul_precision("highest"):
    return jax.scipy.linalg.expm(skew)


_TAYLOR_DEGREES = (1, 2, 4, 6, 8, 12, 18)


@functools.lru_cache(maxsize=None)
def _taylor_thresholds(dtype_name: str) -> tuple[float, ...]:
  """θ_m with Σ_{j≥m} θʲ/j! = u, the unit roundoff of the dtype, by bisection: below it
  the degree-m polynomial is exact to u in value and in first derivative."""
  u = float(np.finfo(dtype_name).eps) / 2

  def remainder(t, m):
    return sum(t**j / math.factorial(j) for j in range(m, m + 60))

  thetas = []
  for m in _TAYLOR_DEGREES:
    lo, hi = 0.0, 16.0
    for _ in range(100):
      lo, hi = ((lo + hi) / 2, hi) if remainder((lo + hi) / 2, m) < u else (lo, (lo + hi) / 2)
    thetas.append(lo)
  return tuple(thetas)


def _taylor_polynomial(a, m: int) -> jax.Array:
  """Σ_{j≤m} aʲ/j! (Paterson–Stockmeyer: powers up to aˢ, s = ⌈√m⌉, then Horner in aˢ)."""
  eye = jnp.broadcast_to(jnp.eye(a.shape[-1], dtype=a.dtype), a.shape)
  if m == 1:
    return eye + a
  s = math.isqrt(m - 1) + 1
  powers = [eye, a]
  for _ in range(s - 1):
    powers.append(mm(powers[-1], a))
  coef = [1 / math.factorial(j) for j in range(m + 1)]

  def block(b):  # Σ_i c_{bs+i} aⁱ, i < s
    return sum(coef[b * s + i] * powers[i] for i in range(s) if b * s + i <= m)

  top = m // s  # the last block; a lone constant term folds into a scalar times aˢ
  if m % s == 0:
    result, top = block(top - 1) + coef[m] * powers[s], top - 1
  else:
    result = block(top)
  for b in range(top - 1, -1, -1):
    result = block(b) + mm(powers[s], result)
  return result


def _taylor(skew) -> jax.Array:
  """expm of a skew-symmetric or skew-Hermitian batch: the degree its ‖·‖₁ allows, or Padé."""
  if skew.size == 0:  # an empty batch (or n = 0): nothing to bound, as the other methods
    return skew
  thetas = _taylor_thresholds(np.dtype(jnp.finfo(skew.dtype).dtype).name)
  norm = jax.lax.stop_gradient(jnp.max(jnp.sum(jnp.abs(skew), axis=-2)))
  index = jnp.sum(norm > jnp.asarray(thetas, norm.dtype))
  branches = [functools.partial(_taylor_polynomial, m=m) for m in _TAYLOR_DEGREES] + [_pade]
  return jax.lax.switch(index, branches, skew)


_MATRIX_METHODS = {"pade": _pade, "taylor": _taylor}


def _spectral_factors(hermitian, symmetrize):
  """eigh(i·L) = W diag(θ) Wᴴ, returned as θ, W, Wp = W diag(p), Wq = conj(W) diag(p).

  With p = e^{-iθ/2}: U = W diag(p²) Wᴴ = Wp Wqᵀ, and the phase factor of F splits as
  e^{-i(θ_i+θ_j)/2} = p_i p_j, so the only n×n transcendental left in the derivative
  is the real sinc. `hermitian` is i·L; eigh symmetrises it if asked.
  """
  theta, w = jnp.linalg.eigh(hermitian, symmetrize_input=symmetrize)
  p = jnp.exp(-0.5j * theta).astype(w.dtype)[..., None, :]
  return theta, w, w * p, jnp.conj(w) * p


def _spectral_jvp(hermitian, dk, symmetrize):
  """U and dU = Wp (S ∘ (Wᴴ dK W)) Wqᵀ for U = expm(K), iK = `hermitian`."""
  theta, w, wp, wq = _spectral_factors(hermitian, symmetrize)
  half_gap = 0.5 * (theta[..., :, None] - theta[..., None, :])
  # jnp.sinc(x) = sin(πx)/(πx): exact at Δ = 0, no 0/0 for (near-)equal eigenvalues.
  sinc = jnp.sinc(half_gap / jnp.asarray(jnp.pi, theta.dtype)).astype(w.dtype)
  # Associated right to left, so that the transpose (reverse mode) runs left to right:
  # K̄ = (conj(W) [((Wpᵀ Ḡ) Wq) ∘ S]) Wᵀ.
  inner = mm(jnp.conj(jnp.matrix_transpose(w)), mm(dk, w)) * sinc
  return mm(wp, jnp.matrix_transpose(wq)), mm(wp, mm(inner, jnp.matrix_transpose(wq)))


def _eigh_unitary(hermitian, symmetrize):
  _, _, wp, wq = _spectral_factors(hermitian, symmetrize)
  return mm(wp, jnp.matrix_transpose(wq))


@jax.custom_jvp
def _expm_skew_hermitian(skew):
  return _eigh_unitary(1j * skew, True)


@_expm_skew_hermitian.defjvp
def _expm_skew_hermitian_jvp(primals, tangents):
  (skew,), (d_skew,) = primals, tangents
  # Only the skew-Hermitian part of L reaches the output (eigh symmetrises i·L).
  dk = 0.5 * (d_skew - jnp.conj(jnp.matrix_transpose(d_skew)))
  return _spectral_jvp(1j * skew, dk, True)


def _skew_hermitian_by_scatter(lam):
  """L(λ) by scatters of its n² entries into zeros: the transpose is gathers.

  Entries: i·λ_a on the diagonal, λ_anti + i·λ_sym at (r, s), -λ_anti + i·λ_sym at
  (s, r). A split (not slices) and one scatter per block, so that the transpose reads
  λ̄ with one gather per block and one concatenate, like `algebra.cotangent_to_lambdas`.
  """
  n = algebra.n_from_num_lambdas(lam.shape[-1])
  m = n * (n - 1) // 2
  diag, sym, anti = jnp.split(lam, [n, n + m], axis=-1)
  on_diag, upper, lower = algebra.entry_positions(n)
  flat = jnp.zeros(lam.shape[:-1] + (n * n,), algebra.complex_dtype_for(lam.dtype))
  for positions, block in ((on_diag, jax.lax.complex(jnp.zeros_like(diag), diag)),
                           (upper, jax.lax.complex(anti, sym)),
                           (lower, jax.lax.complex(-anti, sym))):
    flat = flat.at[..., positions].add(block, unique_indices=True)
  return flat.reshape(lam.shape[:-1] + (n, n))


# i·L(λ) is Hermitian by construction: no symmetrising pass before eigh.
@jax.custom_jvp
def _unitary_from_lambdas(lam):
  return _eigh_unitary(algebra.lambdas_to_hermitian(lam), False)


@_unitary_from_lambdas.defjvp
def _unitary_from_lambdas_jvp(primals, tangents):
  (lam,), (d_lam,) = primals, tangents
  return _spectral_jvp(algebra.lambdas_to_hermitian(lam), _skew_hermitian_by_scatter(d_lam),
                       False)


def expm_skew_hermitian(skew, method: str = "auto") -> jax.Array:
  """U = expm(K) for K = (L - Lᴴ)/2, the skew-Hermitian part of L.

  Only the skew-Hermitian part of `skew` is used; for skew-Hermitian L this is exactly
  expm(L), and U is unitary for every finite input (to rounding, for "pade", whose
  scaling and squaring overflows to NaN for very large K: at n = 2, finite at
  ‖K‖₂ = 1.2e5, NaN at 1.2e6; "eigh" is not bounded so). Values are not checked: a
  NaN in L gives a NaN U. Both autodiff modes work with either method; derivatives are
  taken of the skew-Hermitian part.

  With method "eigh" the derivative is the O(n³) spectral rule of the module
  docstring: first derivatives (`grad`, `jacrev`, `jvp`, `jacfwd`) are exact and
  finite at repeated eigenvalues (e.g. L = 0); second derivatives are exact at
  distinct eigenvalues but NaN or wrong at repeated ones (module docstring). With
  "pade" JAX differentiates `jax.scipy.linalg.expm` to any order, finite everywhere.

  Args:
    skew: array (..., n, n); complex64/complex128, or real (read as a real matrix,
      whose skew-symmetric part is used), float32 -> complex64, float64 -> complex128.
    method: "eigh" (one eigh, spectral derivative), "pade" (`jax.scipy.linalg.expm`),
      "taylor" (near 0: the Taylor degree ‖K‖₁ allows, Padé beyond; module docstring)
      or "auto": `choose_method(n, batch_size)` at trace time, batch_size being the
      product of the leading axes (under `jax.vmap` that is 1).

  Returns:
    Complex array (..., n, n), unitary.

  Raises:
    ValueError: if `skew` is not a square matrix (rank < 2 or unequal last axes) or is
      half precision (float16, bfloat16), or `method` is not one of `METHODS`.
  """
  skew = algebra.as_complex_square(skew, "skew")
  method = _resolve_method(method, skew.shape)
  if method != "eigh":
    return _MATRIX_METHODS[method](0.5 * (skew - jnp.conj(jnp.matrix_transpose(skew))))
  return _expm_skew_hermitian(skew)


def unitary_from_lambdas(lam, method: str = "auto") -> jax.Array:
  """U(λ) = expm(Σ_j λ_j T_j), the paper's parametrization of U(n).

  Derivatives in both modes, as `expm_skew_hermitian`.

  Args:
    lam: real array (..., n²) of u(n) coefficients in the order of `basis(n)`, float32
      or float64 (integers are promoted).
    method: "eigh", "pade", "taylor" or "auto", as in `expm_skew_hermitian`.

  Returns:
    Complex array (..., n, n), unitary; complex64 for float32 λ, complex128 for float64.

  Raises:
    ValueError: if `lam` is complex, half precision (float16, bfloat16) or its last
      axis is not a perfect square (`algebra.check_lambdas`), or `method` is not one
      of `METHODS`.
  """
  check_method(method)
  lam = algebra.check_lambdas(lam)
  n = algebra.n_from_num_lambdas(lam.shape[-1])
  method = _resolve_method(method, lam.shape[:-1] + (n, n))
  if method != "eigh":
    return _MATRIX_METHODS[method](algebra.lambdas_to_skew_hermitian(lam))
  return _unitary_from_lambdas(lam)


def orthogonal_from_lambdas(mu, method: str = "auto") -> jax.Array:
  """R(μ) = expm(A(μ)), a real special orthogonal matrix from so(n) coefficients.

  "eigh" exponentiates A(μ) as a (complex) skew-Hermitian matrix and keeps the real
  part; "pade" runs `jax.scipy.linalg.expm` on the real matrix A(μ). Derivatives in
  both modes, as `expm_skew_hermitian`.

  Args:
    mu: real array (..., n(n-1)/2), float32 or float64 (integers are promoted); see
      `lambdas_to_skew_symmetric` for the order.
    method: "eigh", "pade", "taylor" or "auto", as in `expm_skew_hermitian`.

  Returns:
    Real array (..., n, n) of the same dtype, orthogonal with determinant +1.

  Raises:
    ValueError: if `mu` is complex, half precision (float16, bfloat16) or its length is
      not n(n-1)/2 for an integer n ≥ 2, or `method` is not one of `METHODS`.
  """
  check_method(method)
  return _expm_real_skew(algebra.lambdas_to_skew_symmetric(mu), method)


def _expm_real_skew(skew, method):
  method = _resolve_method(method, skew.shape, real=True)
  if method != "eigh":
    return _MATRIX_METHODS[method](skew)
  return jnp.real(_expm_skew_hermitian(algebra.as_complex_square(skew, "skew")))


def expm_skew_symmetric(skew, method: str = "auto") -> jax.Array:
  """R = expm(A) for A = (S - Sᵀ)/2, the skew-symmetric part of a real matrix S.

  The real counterpart of `expm_skew_hermitian`, with the same derivatives in both
  modes: "eigh" runs the complex spectral path on i·A, "pade" runs
  `jax.scipy.linalg.expm` on the real matrix, and "auto" asks
  `choose_method(n, batch_size, real=True)` (Padé for one matrix of n ≥ 16 on CPU).

  Args:
    skew: real array (..., n, n), float32 or float64 (integers become the default float).
    method: "eigh", "pade", "taylor" or "auto".

  Returns:
    Real array (..., n, n) of the input's float dtype, orthogonal with determinant +1.

  Raises:
    ValueError: if `skew` is complex, half precision (float16, bfloat16) or not a
      square matrix, or `method` is not one of `METHODS`.
  """
  check_method(method)
  skew = algebra.as_square_matrix(skew, "skew")
  if jnp.iscomplexobj(skew):
    raise ValueError(f"skew must be real (use expm_skew_hermitian for complex); got {skew.dtype}.")
  if jnp.issubdtype(skew.dtype, jnp.floating):
    algebra.check_real_dtype(skew.dtype, "skew's dtype")
  else:
    skew = skew.astype(jnp.result_type(float))
  return _expm_real_skew(0.5 * (skew - jnp.matrix_transpose(skew)), method)
