r"""The RNN family's config: one table of fields (paper §4, Figure 3, and beyond).

`FIELDS` lists every field once: its default, what it accepts (read off the registries
of models, tasks, activations and optimizers), whether it enters a unit's identity,
and what it means; `MODEL_FIELDS` does the same for an entry of the per-model table
`models`, whose values per task are `paper_models(task)`. `defaults()` is the config a
user starts from (the paper's adding problem); the experiments are small files in the
repository's ``configs/`` folder (``configs/adding.py``, ``configs/memory.py``,
``configs/copy_long.py``, ...) that start from it, and `get_config(name)` loads one::

    python -m lie_unitary.experiments.rnn --config=memory --workdir=runs/memory
    python scripts/train_rnn.py --config=configs/memory.py --workdir=runs/memory

Any field can be overridden, e.g. ``--config.num_replicates=1``,
``--config.models.gurnn_beta.learning_rate=1e-2``; list fields are tuples: repeat the
flag or give a comma list (``--config.model=gurnn,lstm``; ``--config.lr_drops='()'``
for none).

A unit is every replicate of one (model, T). Its identity holds the task, the model,
T, the model's entry of `models` and the fields of `FIELDS` whose identity rule holds
for the model (h0 only for models with a complex state, the λ fields only for the
guRNNs, the refresh fields only when a refresh is on, `data_parallel` only when > 1
and it changes the numbers (on the image tasks only with a random initial state):
units without them keep the identity they had before those fields existed).
`num_updates` says where a unit stops, not what it is: a larger value extends finished
units.
"""

from __future__ import annotations

import math

import ml_collections

from lie_unitary import nn as lnn
from lie_unitary import principal_branch
from lie_unitary.experiments import config_files
from lie_unitary.experiments import fields as F
from lie_unitary.experiments import training
from lie_unitary.experiments.rnn import data
from lie_unitary.experiments.rnn import images
from lie_unitary.experiments.rnn import trainer

__all__ = ["BUDGETS", "FIELDS", "MODEL_FIELDS", "NAMED_CONFIGS", "budget_hidden_size", "defaults",
           "get_config", "image_models", "paper_models", "task_models"]

# The experiments of ``configs/`` that `get_config` and ``--config=NAME`` know.
NAMED_CONFIGS = {"adding": "adding", "memory": "memory", "copy_long": "copy_long",
                 "adding_long": "adding_long", "smoke": "rnn_smoke",
                 "pixel_mnist": "pixel_mnist", "permuted_mnist": "permuted_mnist"}
# Parameter budgets of the sequential-image tables: expRNN's orthogonal RNN of this many
# units (16K, 69K, 137K parameters on MNIST); every model is sized to its count.
BUDGETS = {"16k": 170, "69k": 360, "137k": 512}
# The models of the sequential-image tasks.
IMAGE_MODELS = ("gurnn", "orthogonal", "lstm")


def _models(*names):
  return lambda config, model: model in names


def _lambda_refresh(config, model) -> bool:
  return model in trainer.LAMBDA_MODELS and config.lambda_refresh != "none"


def _split(config, model) -> bool:
  # The image tasks split each batch's own images over the devices: with a zero initial
  # state the split changes only the order of float sums, so it is not the unit's.
  zero_state = model not in trainer.H0_MODELS or config.h0 != "random"
  return config.data_parallel > 1 and not (config.task in data.IMAGE_TASKS and zero_state)


def _eps_outside(config, model) -> bool:
  # Only the non-default value enters the identity: units made before the field keep
  # their ids and their checkpoints.
  return not config.rmsprop_eps_in_sqrt


def _phase_range(config, model) -> bool:
  # Only a range other than the full circle enters the identity (units made before the
  # field keep their ids), and only where the phases init uses it.
  return (model in trainer.LAMBDA_MODELS and config.lambda_init == "phases"
          and config.lambda_phase_range != math.pi)


def _images(config, model) -> bool:
  return config.task in data.IMAGE_TASKS


def _permuted(config, model) -> bool:
  return config.task == "permuted"


_POSITIVE = F.integer(1)
_NONNEGATIVE = F.number(0.0)

# An entry of the per-model table (each model has the fields its `paper_models` entry has).
MODEL_FIELDS = {
    "hidden_size": F.Field(30, _POSITIVE, "State size: complex units for guRNN/free (the "
                           "state is [Re h, Im h], 2n reals) and the ruRNN, real units "
                           "otherwise."),
    "beta": F.Field(1.0, F.number(positive=True), "β in front of U: the recurrence is "
                    "f(β U h + V x + b)."),
    "activation": F.Field("relu", F.one_of(lnn.GURNN_ACTIVATIONS), "Nonlinearity: relu, "
                          "tanh, identity, or modrelu (per complex unit)."),
    "learning_rate": F.Field(1e-3, F.number(positive=True), "RMSProp learning rate of "
                             "every parameter but λ."),
    "lambda_learning_rate": F.Field(1e-3, F.number(positive=True), "Learning rate of λ."),
    "clip_value": F.Field(0.0, _NONNEGATIVE, "Gradient clipping by value to [-clip_value, "
                          "clip_value] (0 = off)."),
}

FIELDS = {
    "variant": F.Field("", F.string(), "The experiment's name (recorded in the launch "
                       "file; not used by the computation).", identity=False),
    "task": F.Field(
        "adding", F.one_of((*data.TASKS, "copy")), "The problem: 'adding' or 'memory' "
        "('copy' is an alias of 'memory'). `models` holds the task's per-model settings "
        "(`paper_models(task)`): set both together.", identity=False),
    "model": F.Field(
        ("gurnn_beta",), F.tuple_of(F.one_of(trainer.MODELS), unique=True,
                                    example="('gurnn', 'lstm') or --config.model=gurnn,lstm"),
        "Models: gurnn (β = 1), gurnn_beta, urnn (ruRNN), lstm, irnn, tanh, free (the "
        "guRNN's recurrence with an unconstrained 2n×2n matrix).", identity=False),
    "T": F.Field((100,), F.tuple_of(F.integer(1), unique=True, example="(100, 200)"),
                 "Sequence lengths T (memory: T - 1 blanks, length T + 20).",
                 identity=False),
    "models": F.Field(None, None, "Per-model settings (`MODEL_FIELDS`), the paper's for "
                      "the task by default (`paper_models`).", identity=False),
    "h0": F.Field("random", F.one_of(lnn.H0_INITS), "guRNN / ruRNN initial state: "
                  "'random' (U(±sqrt(3/(2n))), redrawn each update) or 'zeros'.",
                  identity=_models(*trainer.H0_MODELS)),
    "lambda_init_std": F.Field(1.0, _NONNEGATIVE, "Standard deviation of the guRNN's λ at "
                               "init (N(0, std²) as the paper: 1); 0 = λ = 0, U = I.",
                               identity=_models(*trainer.LAMBDA_MODELS)),
    "lambda_init": F.Field(
        "normal", F.one_of(trainer.LAMBDA_INITS), "guRNN λ init: 'normal' (N(0, "
        "lambda_init_std²), the paper), 'phases' (U = diag(e^{iθ}), θ ~ U(-π, π): Henaff "
        "et al.'s init for the copy task), 'zeros' (U = I) or 'haar' (the principal "
        "logarithm of a Haar-random U).", identity=_models(*trainer.LAMBDA_MODELS)),
    "lambda_phase_range": F.Field(
        math.pi, F.number(positive=True), "With lambda_init='phases': θ ~ U(-r, r) for this "
        "r (π: the whole circle, Henaff et al.'s; π/2: the eigenphases of expRNN's Cayley "
        "init of the orthogonal RNN).", identity=_phase_range),
    "lambda_refresh": F.Field(
        "none", F.one_of(trainer.LAMBDA_REFRESHES), "guRNN λ refresh every "
        "lambda_refresh_every updates (before update u, u % every == 0), U unchanged: "
        "'none', 'recentre' (λ ← the principal logarithm's coefficients) or 'rebase' "
        "(U₀ ← U₀ · U(λ), λ ← 0: the dynamic trivialization).", identity=_lambda_refresh),
    "lambda_refresh_every": F.Field(100, _POSITIVE, "Updates between λ refreshes.",
                                    identity=_lambda_refresh),
    "lambda_refresh_state": F.Field(
        "keep", F.one_of(principal_branch.REFRESH_STATES), "At a refresh, the optimizer "
        "statistics of λ: 'keep' or 'reset' (step counts kept).", identity=_lambda_refresh),
    "lambda_optimizer": F.Field(
        "sgd", F.one_of(training.OPTIMIZERS), "Optimizer of the guRNN's λ: 'sgd' (plain "
        "gradient steps at lambda_learning_rate, as the original code) or 'rmsprop' (its "
        "own RMSProp).", identity=_models(*trainer.LAMBDA_MODELS)),
    "lr_drops": F.Field(
        (), F.tuple_of(F.integer(0), nonempty=False, example="(45000, 65000)"),
        "Updates from which every learning rate is multiplied by lr_drop_factor (update u "
        "≥ d, counted from 0, gets one more factor)."),
    "lr_drop_factor": F.Field(0.1, _NONNEGATIVE, "Factor of each learning-rate drop."),
    "num_updates": F.Field(
        50_000, _POSITIVE, "Updates (batches) per replicate; 50,000 = 10 epochs of 100,000 "
        "sequences as the paper. Where a unit stops, not what it is.", identity=False),
    "num_replicates": F.Field(3, _POSITIVE, "Independent replicates per unit (replicate r: "
                              "seed fold_in(seed, r)), one vmapped program."),
    "batch_size": F.Field(20, _POSITIVE, "Sequences per update."),
    "data_parallel": F.Field(
        1, _POSITIVE, "Devices that split each replicate's batch (each takes batch_size / "
        "data_parallel sequences; the gradients are averaged; the image tasks split their "
        "evaluation batches too). Several processes (--num_processes) or, in one CPU "
        "process, XLA_FLAGS=--xla_force_host_platform_device_count=N make the devices.",
        identity=_split),
    "rmsprop_decay": F.Field(0.9, F.number(0.0, below=1.0), "RMSProp decay (no momentum)."),
    "rmsprop_eps": F.Field(1e-10, _NONNEGATIVE, "RMSProp epsilon (see rmsprop_eps_in_sqrt)."),
    "rmsprop_eps_in_sqrt": F.Field(
        True, F.boolean(), "Add rmsprop_eps under the square root (TensorFlow's and optax's) "
        "or, False, outside it (PyTorch's RMSprop, which expRNN's code runs).",
        identity=_eps_outside),
    "rmsprop_initial_scale": F.Field(
        1.0, _NONNEGATIVE, "RMSProp's initial mean square: 1.0 as TensorFlow's "
        "RMSPropOptimizer (the original code), 0 as optax."),
    "num_train": F.Field(100_000, F.integer(0), "Training sequences per replicate "
                         "(visited in the same order each epoch); 0 = fresh every update."),
    "val_every": F.Field(150, _POSITIVE, "Validate every this many updates (the paper: 150)."),
    "val_size": F.Field(1_000, _POSITIVE, "Sequences in the fixed validation subsample of "
                        "the curve."),
    "eval_size": F.Field(10_000, _POSITIVE, "Sequences in the full validation and test "
                         "sets, evaluated at the end."),
    "eval_batch_size": F.Field(1_000, _POSITIVE, "Sequences per evaluation batch (a divisor "
                               "of val_size and eval_size; it sets which sequences the "
                               "fixed sets hold)."),
    "seed": F.Field(0, F.integer(0), "Root seed of initialisation and training data."),
    "eval_seed": F.Field(1234, F.integer(0), "Seed of the validation and test sets (shared "
                         "by all models and replicates)."),
    "unroll": F.Field(1, _POSITIVE, "Time steps per iteration of the compiled loop: a "
                      "speed setting, but part of a unit's identity (XLA may fuse and round "
                      "differently)."),
    "dataset": F.Field(
        "mnist", F.string(), "Image tasks: 'mnist', 'fashion_mnist', 'kmnist', or the path "
        "of any folder holding the four IDX files.", identity=_images),
    "data_dir": F.Field(
        "", F.string(), f"Image tasks: where the dataset's IDX files are; '' = "
        f"${images.DATA_DIR_ENV}/<dataset>, or Debian's Fashion-MNIST package "
        f"({images.DEBIAN_FASHION_MNIST_DIR}) when installed.", identity=False),
    "permutation_seed": F.Field(
        data.PERMUTATION_SEED, F.integer(0), "The permuted task's fixed pixel order: "
        "numpy.random.RandomState(seed).permutation(784) (expRNN's).", identity=_permuted),
    "num_validation": F.Field(
        data.NUM_VALIDATION, F.integer(1), "Image tasks: the last this many training "
        "images are the validation set (the rest train).", identity=_images),
    "param_budget": F.Field(
        "", F.one_of(("",) + tuple(BUDGETS)), "Image tasks: '' (each model's hidden_size), "
        "or a parameter budget that sizes every model to the count of expRNN's orthogonal "
        f"RNN of {BUDGETS} units.", identity=False),
}


def paper_models(task: str) -> ml_collections.ConfigDict:
  """The per-model settings of the paper (§4) and the original runs for `task`.

  hidden_size: 30 (complex units for guRNN/free, real for LSTM/IRNN/tanh), ruRNN 512
  (adding) / 128 (memory). beta: 1 for gurnn, 1.4 (adding) / 1.05 (memory) for
  gurnn_beta and free. learning_rate: 1e-4 for IRNN, 1e-3 otherwise. clip_value: none
  for the unitary models and free, 1.0 (by value) for the others. activation: relu
  (adding) / tanh (memory) for gurnn, gurnn_beta and free.

  Raises:
    ValueError: an unknown task.
  """
  name = data.get_task(task).name
  beta = {"adding": 1.4, "memory": 1.05}[name]
  activation = {"adding": "relu", "memory": "tanh"}[name]

  def gurnn(beta, with_lambda=True):
    names = ["hidden_size", "beta", "activation", "learning_rate",
             "lambda_learning_rate", "clip_value"]
    values = dict(beta=beta, activation=activation)
    return ml_collections.ConfigDict({
        k: values.get(k, MODEL_FIELDS[k].default) for k in names
        if with_lambda or k != "lambda_learning_rate"})

  def plain(hidden_size, learning_rate, clip_value):
    return ml_collections.ConfigDict({"hidden_size": hidden_size,
                                      "learning_rate": learning_rate,
                                      "clip_value": clip_value})

  return ml_collections.ConfigDict({
      "gurnn": gurnn(1.0),
      "gurnn_beta": gurnn(beta),
      "free": gurnn(beta, with_lambda=False),
      "urnn": plain({"adding": 512, "memory": 128}[name], 1e-3, 0.0),
      "lstm": plain(30, 1e-3, 1.0),
      "irnn": plain(30, 1e-4, 1.0),
      "tanh": plain(30, 1e-3, 1.0),
      # Beyond the paper: expRNN's orthogonal RNN, a real state of the guRNN's size.
      "orthogonal": _orthogonal(60, 1e-3),
  })


def _orthogonal(hidden_size, learning_rate):
  return ml_collections.ConfigDict({
      "hidden_size": hidden_size, "learning_rate": learning_rate,
      "lambda_learning_rate": learning_rate / 10, "clip_value": 0.0})


def image_models(budget: str = "16k") -> ml_collections.ConfigDict:
  """The per-model settings of the sequential-image tasks at a parameter budget.

  The orthogonal RNN as expRNN's code ran it on permuted MNIST (RMSProp at 1e-3, its μ
  at 1e-4; hidden units `BUDGETS[budget]`); the guRNN (modReLU, β = 1) with λ at a
  tenth of the rate likewise; the LSTM at 1e-3. Each model's hidden_size gives the
  budget's parameter count (`budget_hidden_size`).

  Raises:
    ValueError: an unknown budget.
  """
  if budget not in BUDGETS:
    raise ValueError(f"unknown parameter budget {budget!r}; expected one of {tuple(BUDGETS)}.")
  gurnn = ml_collections.ConfigDict({
      "hidden_size": budget_hidden_size("gurnn", budget), "beta": 1.0,
      "activation": "modrelu", "learning_rate": 1e-3, "lambda_learning_rate": 1e-4,
      "clip_value": 0.0})
  lstm = ml_collections.ConfigDict({"hidden_size": budget_hidden_size("lstm", budget),
                                    "learning_rate": 1e-3, "clip_value": 1.0})
  return ml_collections.ConfigDict({
      "gurnn": gurnn, "orthogonal": _orthogonal(BUDGETS[budget], 1e-3), "lstm": lstm})


def budget_hidden_size(model: str, budget: str, input_size: int = 1,
                       output_size: int = 10) -> int:
  """The hidden size of `model` whose trainable count (`trainer.num_params`) is nearest
  to that of expRNN's orthogonal RNN at `budget` (ties: the smaller).

  Raises:
    ValueError: an unknown budget or model.
  """
  if budget not in BUDGETS:
    raise ValueError(f"unknown parameter budget {budget!r}; expected one of {tuple(BUDGETS)}.")
  target = trainer.num_params("orthogonal", BUDGETS[budget], input_size, output_size)
  activation = "modrelu" if model in trainer.GURNN_MODELS else ""
  count = lambda n: trainer.num_params(model, n, input_size, output_size, activation)
  n = 1
  while count(n + 1) <= target:
    n += 1
  return n if target - count(n) <= count(n + 1) - target else n + 1


def task_models(task: str, budget: str = "16k") -> ml_collections.ConfigDict:
  """The per-model table of `task`: `paper_models` for adding and memory, `image_models`
  for the image tasks."""
  if task in data.IMAGE_TASKS:
    return image_models(budget)
  return paper_models(task)


def defaults() -> ml_collections.ConfigDict:
  """The family's default config: the paper's adding problem at T = 100 (`FIELDS`)."""
  c = F.defaults(FIELDS)
  c.models = paper_models(c.task)
  return c


def get_config(name: str = "adding") -> ml_collections.ConfigDict:
  """The config of a named experiment of ``configs/`` (`NAMED_CONFIGS`).

  Raises:
    ValueError: an unknown name.
  """
  return config_files.load(NAMED_CONFIGS, name, "rnn")
