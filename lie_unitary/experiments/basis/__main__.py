"""``python -m lie_unitary.experiments.basis --config=NAME --workdir=DIR``: fits m operators
that share k hidden generators of u(n) by each approach of the config, then writes
WORKDIR/report.md (NAME: a file of configs/ or a path; flags:
`lie_unitary.experiments.launch`)."""

from lie_unitary.experiments import launch

if __name__ == "__main__":
  launch.main("basis")
