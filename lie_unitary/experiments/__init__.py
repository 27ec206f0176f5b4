"""Experiments: learning unitary operators (paper §3) and unitary RNNs (paper §4), run by
`runner.train_and_evaluate`; this package reads their records (and loads no jax)."""

from lie_unitary.experiments.workdir import LoadedUnit
from lie_unitary.experiments.workdir import load_results
from lie_unitary.experiments.workdir import load_unit
from lie_unitary.experiments.workdir import unit_names

__all__ = ["LoadedUnit", "load_results", "load_unit", "unit_names"]
