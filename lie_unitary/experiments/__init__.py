"""Experiments: learning unitary operators (paper §3) and unitary RNNs (paper §4).

Both families run through one runner (`runner.train_and_evaluate`): config
validation, launch records with provenance, resume, orbax checkpoints, one process per
unit (claims), every CPU core or accelerator, and multi-host runs. In a notebook::

    from lie_unitary import experiments
    from lie_unitary.experiments.operators import config, experiment
    experiment.train_and_evaluate(config.get_config("operators_smoke"), "runs/smoke")
    df = experiments.load_results("runs/smoke")          # pandas, when installed
    u = experiments.load_unit("runs/smoke", "n=3 lie_algebra epochs=1 lr=0.001 seed=0")

Importing this package loads no jax (config files import the families' field tables).
"""

from lie_unitary.experiments.workdir import LoadedUnit
from lie_unitary.experiments.workdir import load_results
from lie_unitary.experiments.workdir import load_unit
from lie_unitary.experiments.workdir import unit_names

__all__ = ["LoadedUnit", "load_results", "load_unit", "unit_names"]
