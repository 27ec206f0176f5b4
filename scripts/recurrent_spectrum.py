r"""Where training has taken the recurrent matrix of a saved guRNN or orthogonal RNN unit.

For each replicate of each unit given, from the unit's last checkpoint: the norm of
its Lie-algebra coefficients (the guRNN's λ, the orthogonal RNN's μ), the fraction of
the generator's Frobenius norm off its initial pattern (the guRNN starts diagonal
under `lambda_init='phases'`, the orthogonal RNN block-diagonal in 2×2 rotations
under the Cayley init, so 0 at step 0), and how the eigenvalues of U = expm(L) spread
on the unit circle (a histogram of their phases in 8 bins over (-π, π]).

  python scripts/recurrent_spectrum.py --workdir=results/psfashion_16k \
      --units='permuted T=784 gurnn','permuted T=784 orthogonal'

Run it on copies of a workdir at earlier commits (`git archive`) to follow a run.
"""

from absl import app
from absl import flags
import jax.numpy as jnp
import numpy as np

import lie_unitary as lu
from lie_unitary.experiments import loading

_WORKDIR = flags.DEFINE_string("workdir", None, "The experiment's workdir.", required=True)
_UNITS = flags.DEFINE_list("units", ["permuted T=784 gurnn", "permuted T=784 orthogonal"],
                           "Unit names (or ids) to read.")


def _generator(cell) -> tuple[np.ndarray, np.ndarray]:
  """(L, mask of its initial pattern) per replicate: (R, n, n) each."""
  if "lam" in cell:
    gen = np.asarray(lu.lambdas_to_skew_hermitian(jnp.asarray(cell["lam"])))
    mask = np.eye(gen.shape[-1], dtype=bool)
  else:
    gen = np.asarray(lu.lambdas_to_skew_symmetric(jnp.asarray(cell["mu"])))
    n = gen.shape[-1]
    pair = np.arange(n) // 2
    mask = pair[:, None] == pair[None, :]  # the 2×2 blocks of the Cayley init
  return gen, mask


def main(argv):
  del argv
  edges = np.linspace(-np.pi, np.pi, 9)
  for name in _UNITS.value:
    unit = loading.load_unit(_WORKDIR.value, name)
    cell = unit.state["params"]["params"]["cell"]
    coeffs = np.asarray(cell["lam"] if "lam" in cell else cell["mu"])
    gen, mask = _generator(cell)
    print(f"{unit.name} at step {unit.step}:")
    for r in range(gen.shape[0]):
      off = np.linalg.norm(np.where(mask, 0, gen[r])) / np.linalg.norm(gen[r])
      as_matrix = lu.unitary_from_lambdas if "lam" in cell else lu.orthogonal_from_lambdas
      phases = np.angle(np.linalg.eigvals(np.asarray(as_matrix(jnp.asarray(coeffs[r])))))
      hist, _ = np.histogram(phases, edges)
      print(f"  replicate {r}: |coefficients| {np.linalg.norm(coeffs[r]):.3f}, off the "
            f"initial pattern {off:.3f}, eigenphases per π/4 from -π: {hist.tolist()}")


if __name__ == "__main__":
  app.run(main)
