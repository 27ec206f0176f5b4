r"""Where training has taken the recurrent matrix of a saved guRNN or orthogonal RNN unit.

Per replicate, from the unit's last checkpoint: the norm of λ (μ), the fraction of the
generator's norm off its initial pattern (diagonal under `lambda_init='phases'`, 2×2
blocks under the Cayley init) and a histogram of U's eigenphases in 8 bins over [-π, π).

  python scripts/recurrent_spectrum.py --workdir=runs/psfashion \
      --units='permuted T=784 gurnn','permuted T=784 orthogonal'

It needs a workdir that still has its units' checkpoints (results/ keeps none).
"""

from absl import app
from absl import flags
import jax.numpy as jnp
import numpy as np

import lie_unitary as lu
from lie_unitary.experiments import workdir

_WORKDIR = flags.DEFINE_string("workdir", None, "The experiment's workdir.", required=True)
_UNITS = flags.DEFINE_list("units", ["permuted T=784 gurnn", "permuted T=784 orthogonal"],
                           "Unit names (or ids) to read.")


def _generator(cell) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(L, mask of its initial pattern, phases of U's eigenvalues) per replicate."""
  if "lam" in cell:
    lam = jnp.asarray(cell["lam"])
    gen = np.asarray(lu.lambdas_to_skew_hermitian(lam))
    mask = np.eye(gen.shape[-1], dtype=bool)
    theta = lu.spectrum(lam)  # U(λ) has eigenvalues e^{-iθ}
  else:
    gen = np.asarray(lu.lambdas_to_skew_symmetric(jnp.asarray(cell["mu"])))
    pair = np.arange(gen.shape[-1]) // 2
    mask = pair[:, None] == pair[None, :]  # the 2×2 blocks of the Cayley init
    theta = jnp.linalg.eigvalsh(1j * gen)  # expm(A) has eigenvalues e^{-iθ}
  return gen, mask, np.asarray(lu.wrap_phases(-theta))


def main(argv):
  del argv
  edges = np.linspace(-np.pi, np.pi, 9)
  for name in _UNITS.value:
    unit = workdir.load_unit(_WORKDIR.value, name)
    cell = unit.state["params"]["params"]["cell"]
    coeffs = np.asarray(cell["lam"] if "lam" in cell else cell["mu"])
    gen, mask, phases = _generator(cell)
    print(f"{unit.name} at step {unit.step}:")
    for r in range(gen.shape[0]):
      off = np.linalg.norm(np.where(mask, 0, gen[r])) / np.linalg.norm(gen[r])
      hist, _ = np.histogram(phases[r], edges)
      print(f"  replicate {r}: |coefficients| {np.linalg.norm(coeffs[r]):.3f}, off the "
            f"initial pattern {off:.3f}, eigenphases per π/4 from -π: {hist.tolist()}")


if __name__ == "__main__":
  app.run(main)
