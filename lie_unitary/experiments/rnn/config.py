"""The RNN family's field tables: what each field accepts and whether it enters a unit's
identity (`FIELDS`; `MODEL_FIELDS` for an entry of `models`). Defaults and meanings: the
light `defaults.get_config()`. A unit's identity: the task, model, T, the model's entry
of `models` and the fields whose identity rule holds for the model (h0 only for complex
states, λ fields only for the guRNNs, refresh fields only with a refresh on).
"""

from __future__ import annotations

import ml_collections

from lie_unitary import nn as lnn
from lie_unitary import principal_branch
from lie_unitary.experiments import fields as F
from lie_unitary.experiments import launch
from lie_unitary.experiments import training
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import defaults
from lie_unitary.experiments.rnn import trainer
from lie_unitary.experiments.rnn.defaults import NAMED_CONFIGS
from lie_unitary.experiments.rnn.defaults import image_models
from lie_unitary.experiments.rnn.defaults import paper_models

__all__ = ["BUDGETS", "FIELDS", "MODEL_FIELDS", "NAMED_CONFIGS", "budget_hidden_size",
           "get_config", "image_models", "paper_models"]

# The size of expRNN's orthogonal RNN whose parameter count sets each budget.
BUDGETS = {budget: sizes["orthogonal"] for budget, sizes in defaults.BUDGETS.items()}
IMAGE_MODELS = ("gurnn", "orthogonal", "lstm")

# Identity rules: (config, model) -> whether the field enters the unit's identity.
_lambda = lambda c, m: m in trainer.LAMBDA_MODELS
_lambda_refresh = lambda c, m: _lambda(c, m) and c.lambda_refresh != "none"
_phases = lambda c, m: _lambda(c, m) and c.lambda_init == "phases"
_images = lambda c, m: c.task in data.IMAGE_TASKS
_POSITIVE = F.integer(1)
_NONNEGATIVE = F.number(0.0)

# An entry of the per-model table (each model has the fields its `paper_models` entry has).
MODEL_FIELDS = {
    "hidden_size": F.Field(_POSITIVE),
    "beta": F.Field(F.number(positive=True)),
    "activation": F.Field(F.one_of(lnn.GURNN_ACTIVATIONS)),
    "learning_rate": F.Field(F.number(positive=True)),
    "lambda_learning_rate": F.Field(F.number(positive=True)),
    "clip_value": F.Field(_NONNEGATIVE),
    "clip_norm": F.Field(_NONNEGATIVE),  # in the identity only when on (`unit_spec`)
}

FIELDS = {
    "variant": F.Field(F.string(), identity=False),
    "task": F.Field(F.one_of((*data.TASKS, "copy")), identity=False),
    "model": F.Field(F.tuple_of(F.one_of(trainer.MODELS), unique=True,
                                example="('gurnn', 'lstm') or --config.model=gurnn,lstm"),
                     identity=False),
    "T": F.Field(F.tuple_of(F.integer(1), unique=True, example="(100, 200)"), identity=False),
    "models": F.Field(None, identity=False),
    "h0": F.Field(F.one_of(lnn.H0_INITS), identity=lambda c, m: m in trainer.H0_MODELS),
    "lambda_init_std": F.Field(_NONNEGATIVE, identity=_lambda),
    "lambda_init": F.Field(F.one_of(trainer.LAMBDA_INITS), identity=_lambda),
    "lambda_phase_range": F.Field(F.number(positive=True), identity=_phases),
    # In the identity only when not the default.
    "readout_init": F.Field(F.one_of(trainer.READOUT_INITS),
                            identity=lambda c, _: c.readout_init != trainer.READOUT_INITS[0]),
    "orthogonal_expm": F.Field(F.one_of(trainer.ORTHOGONAL_EXPMS), identity=lambda c, m: (
        m in trainer.ORTHOGONAL_MODELS and c.orthogonal_expm != trainer.ORTHOGONAL_EXPMS[0])),
    "lstm_forget_bias": F.Field(_NONNEGATIVE, identity=lambda c, m: (
        m == "lstm" and c.lstm_forget_bias != 0)),
    "lambda_refresh": F.Field(F.one_of(trainer.LAMBDA_REFRESHES), identity=_lambda_refresh),
    "lambda_refresh_every": F.Field(_POSITIVE, identity=_lambda_refresh),
    "lambda_refresh_state": F.Field(F.one_of(principal_branch.REFRESH_STATES),
                                    identity=_lambda_refresh),
    "lambda_optimizer": F.Field(F.one_of(training.OPTIMIZERS), identity=_lambda),
    "lr_drops": F.Field(F.tuple_of(F.integer(0), nonempty=False, example="(45000, 65000)")),
    "lr_drop_factor": F.Field(_NONNEGATIVE),
    "num_updates": F.Field(_POSITIVE, identity=False),
    "num_replicates": F.Field(_POSITIVE),
    "batch_size": F.Field(_POSITIVE),
    "data_parallel": F.Field(F.integer(0)),
    "rmsprop_decay": F.Field(F.number(0.0, below=1.0)),
    "rmsprop_eps": F.Field(_NONNEGATIVE),
    "rmsprop_eps_in_sqrt": F.Field(F.boolean()),
    "rmsprop_initial_scale": F.Field(_NONNEGATIVE),
    "num_train": F.Field(F.integer(0)),
    "val_every": F.Field(_POSITIVE),
    "val_size": F.Field(_POSITIVE),
    "eval_size": F.Field(_POSITIVE),
    "eval_batch_size": F.Field(_POSITIVE),
    "seed": F.Field(F.integer(0)),
    "eval_seed": F.Field(F.integer(0)),
    "unroll": F.Field(_POSITIVE),
    "dataset": F.Field(F.string(), identity=_images),
    "data_dir": F.Field(F.string(), identity=False),
    "download": F.Field(F.boolean(), identity=False),
    "permutation_seed": F.Field(F.integer(0), identity=lambda c, _: c.task == "permuted"),
    "num_validation": F.Field(F.integer(1), identity=_images),
    "param_budget": F.Field(F.one_of(("",) + tuple(BUDGETS)), identity=False),
}


def budget_hidden_size(model: str, budget: str, input_size: int = 1,
                       output_size: int = 10) -> int:
  """The hidden size of `model` whose `trainer.num_params` is nearest to that of expRNN's
  orthogonal RNN at `budget` (ties: the smaller). Raises ValueError: unknown budget/model."""
  if budget not in BUDGETS:
    raise ValueError(f"unknown parameter budget {budget!r}; expected one of {tuple(BUDGETS)}.")
  target = trainer.num_params("orthogonal", BUDGETS[budget], input_size, output_size)
  activation = "modrelu" if model in trainer.GURNN_MODELS else ""
  count = lambda n: trainer.num_params(model, n, input_size, output_size, activation)
  n = 1
  while count(n + 1) <= target:
    n += 1
  return n if target - count(n) <= count(n + 1) - target else n + 1


def get_config(name: str = "adding") -> ml_collections.ConfigDict:
  """The config of a named experiment of ``configs/`` (`NAMED_CONFIGS`); ValueError if none."""
  return launch.load_config("rnn", name)
