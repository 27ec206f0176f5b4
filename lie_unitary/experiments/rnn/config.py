"""The RNN family's fields (paper §4, sequential images): a unit is its task, model, T, seed,
`models` entry and the fields whose rule holds for its model. Loads no jax."""

import math

import ml_collections

from lie_unitary.experiments import fields as F

# The experiments that ``--config=NAME`` knows: the files configs/NAME.py.
NAMED_CONFIGS = ("adding", "memory", "copy_long", "adding_long", "rnn_smoke", "pixel_mnist",
                 "permuted_mnist")

MODELS = ("gurnn", "gurnn_beta", "urnn", "lstm", "irnn", "tanh", "free", "orthogonal")
# GURNNCell's models; `free` has an unconstrained 2n×2n matrix in place of U(λ), so no λ.
GURNN_MODELS = ("gurnn", "gurnn_beta", "free")
LAMBDA_MODELS = ("gurnn", "gurnn_beta")
ORTHOGONAL_MODELS = ("orthogonal",)  # expRNN's: W ∈ SO(n) from so(n) coefficients μ
H0_MODELS = ("gurnn", "gurnn_beta", "free", "urnn")  # a complex state, h0 its initial value
IMAGE_TASKS = ("pixel", "permuted")
IMAGE_MODELS = ("gurnn", "orthogonal", "lstm")
# The image models' sizes at expRNN's parameter budgets (`experiment.budget_hidden_size`).
BUDGETS = {"16k": {"gurnn": 116, "orthogonal": 170, "lstm": 62},
           "69k": {"gurnn": 250, "orthogonal": 360, "lstm": 129},
           "137k": {"gurnn": 358, "orthogonal": 512, "lstm": 183}}

_POSITIVE, _NONNEGATIVE, _RATE = F.integer(1), F.number(0.0), F.number(positive=True)

# An entry of `models` (a model has the fields its `paper_models` entry has).
MODEL_FIELDS = {
    "hidden_size": F.Field(30, "state units (complex for the guRNNs, ruRNN, free)", _POSITIVE),
    "beta": F.Field(1.0, "β in f(β U h + V x + b)", _RATE),
    "activation": F.Field(
        "relu", "f", F.one_of(F.registry("lie_unitary.nn", "GURNN_ACTIVATIONS"))),
    "learning_rate": F.Field(1e-3, "RMSProp's rate of all but λ or μ", _RATE),
    "lambda_learning_rate": F.Field(1e-3, "the rate of the guRNN's λ or the orthogonal RNN's μ",
                                    _RATE),
    "clip_value": F.Field(0.0, "clip every gradient entry to ±clip_value (0: off)", _NONNEGATIVE),
    "clip_norm": F.Field(0.0, "> 0: scale the gradient of all but λ or μ to this global norm "
                         "first (0: off)", _NONNEGATIVE, before=0.0),
}


def _table(**entries) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict({m: {**e, "clip_norm": 0.0} for m, e in entries.items()})


def paper_models(task: str) -> ml_collections.ConfigDict:
  """The paper's per-model settings (§4) of 'adding' or 'memory' ('copy'); ValueError: else."""
  name = {"copy": "memory"}.get(task, task)
  if name not in ("adding", "memory"):
    raise ValueError(f"paper_models: task {task!r} is not 'adding' or 'memory'.")
  beta, act = {"adding": (1.4, "relu"), "memory": (1.05, "tanh")}[name]
  gurnn = dict(hidden_size=30, activation=act, learning_rate=1e-3, clip_value=0.0)
  clipped = dict(hidden_size=30, learning_rate=1e-3, clip_value=1.0)
  return _table(
      gurnn=dict(gurnn, beta=1.0, lambda_learning_rate=1e-3),
      gurnn_beta=dict(gurnn, beta=beta, lambda_learning_rate=1e-3),
      free=dict(gurnn, beta=beta),
      urnn=dict(hidden_size={"adding": 512, "memory": 128}[name], learning_rate=1e-3,
                clip_value=0.0),
      lstm=clipped, irnn=dict(clipped, learning_rate=1e-4), tanh=clipped,
      # Beyond the paper: expRNN's orthogonal RNN (a real state of the guRNN's size).
      orthogonal=dict(hidden_size=60, learning_rate=1e-3, lambda_learning_rate=1e-4,
                      clip_value=0.0))


def image_models(budget: str = "16k") -> ml_collections.ConfigDict:
  """The image tasks' per-model settings (expRNN's), sized by `BUDGETS[budget]` (ValueError)."""
  if budget not in BUDGETS:
    raise ValueError(f"unknown parameter budget {budget!r}; expected one of {tuple(BUDGETS)}.")
  size = BUDGETS[budget]
  return _table(
      gurnn=dict(hidden_size=size["gurnn"], beta=1.0, activation="modrelu",
                 learning_rate=1e-3, lambda_learning_rate=1e-4, clip_value=0.0),
      orthogonal=dict(hidden_size=size["orthogonal"], learning_rate=1e-3,
                      lambda_learning_rate=1e-4, clip_value=0.0),
      lstm=dict(hidden_size=size["lstm"], learning_rate=1e-3, clip_value=1.0))


# Identity rules: (config, model) -> whether the field enters the unit's identity.
_lambda = lambda c, m: m in LAMBDA_MODELS
_phases = lambda c, m: _lambda(c, m) and c.lambda_init == "phases"
_refresh = lambda c, m: _lambda(c, m) and c.lambda_refresh != "none"
_images = lambda c, m: c.task in IMAGE_TASKS

FIELDS = {
    "variant": F.Field("", "the experiment's name (recorded only)", F.string, identity=False),
    "task": F.Field("adding", "'adding', 'memory' ('copy') or the image tasks 'pixel', "
                    "'permuted'; set `models` with it",
                    F.one_of(("adding", "memory", "copy") + IMAGE_TASKS), identity=False),
    "model": F.Field(("gurnn_beta",), "models, a unit each: gurnn (β = 1), gurnn_beta, urnn "
                     "(ruRNN), lstm, irnn, tanh, free (an unconstrained 2n×2n guRNN), "
                     "orthogonal (expRNN's)", F.tuple_of(F.one_of(MODELS), unique=True, example=
                     "('gurnn', 'lstm') or --config.model=gurnn,lstm"), identity=False),
    "T": F.Field((100,), "sequence lengths, a unit each (memory: T - 1 blanks, length T + 20; "
                 "images: the pixels)", identity=False,
                 check=F.tuple_of(F.integer(1), unique=True, example="(100, 200)")),
    "seeds": F.Field((0,), "seeds, a unit each (init and training data); replicate r starts "
                     "from fold_in(key(seed), r)", F.tuple_of(F.integer(0), unique=True, example=
                     "(0, 1, 2) or --config.seeds=0,1,2"), identity=False),
    "models": F.Field(paper_models("adding"), "per-model settings (`paper_models`, "
                      "`image_models`), fields `MODEL_FIELDS`", identity=False),
    "h0": F.Field("random", "guRNN / ruRNN initial state: 'random' (U(±sqrt(3/(2n))), redrawn "
                  "each update) or 'zeros'", F.one_of(F.registry("lie_unitary.nn", "H0_INITS")),
                  identity=lambda c, m: m in H0_MODELS),
    "lambda_init_std": F.Field(1.0, "std of the guRNN's λ at init (the paper: 1)", _NONNEGATIVE,
                               identity=_lambda),
    "lambda_init": F.Field(
        "normal", "guRNN λ init: 'normal' (N(0, lambda_init_std²)), 'phases' (U = diag(e^{iθ}), "
        "θ ~ U(-r, r), Henaff et al.'s), 'zeros' (U = I) or 'haar' (log of a Haar U)",
        F.one_of(("normal", "phases", "zeros", "haar")), identity=_lambda),
    "lambda_phase_range": F.Field(math.pi, "r of 'phases' (π/2: expRNN's Cayley init's)", _RATE,
                                  identity=_phases),
    "readout_init": F.Field("lecun_normal", "the readout's init: 'lecun_normal' (flax's Dense) "
                            "or 'torch' (PyTorch's nn.Linear)", F.one_of(("lecun_normal", "torch")),
                            before="lecun_normal"),
    "orthogonal_expm": F.Field(
        "eigh", "the orthogonal RNN's expm(A(μ)): 'eigh' (faster vmapped) or 'pade' (PyTorch's)",
        F.one_of(("eigh", "pade")), identity=lambda c, m: m in ORTHOGONAL_MODELS, before="eigh"),
    "complex_product": F.Field("auto", "the guRNN's modReLU products: 'real', 'gauss' (rounds "
                               "differently) or 'auto' (the faster; recorded resolved)",
                               F.one_of(("auto", "real", "gauss")), identity=_lambda,
                               before="real"),
    "lstm_forget_bias": F.Field(0.0, "the LSTM's forget-gate bias at init (1: Jozefowicz et "
                                "al. 2015's; 0: flax's)", _NONNEGATIVE,
                                identity=lambda c, m: m == "lstm", before=0.0),
    "lambda_refresh": F.Field("none", "guRNN λ refresh before update u with u % "
                              "lambda_refresh_every == 0, U kept: 'none', 'recentre' (λ ← the "
                              "principal log's) or 'rebase' (U₀ ← U₀ U(λ), λ ← 0)",
                              F.one_of(("none", "recentre", "rebase")), identity=_refresh),
    "lambda_refresh_every": F.Field(100, "updates between refreshes", _POSITIVE, identity=_refresh),
    "lambda_refresh_state": F.Field(
        "keep", "λ's optimizer statistics at a refresh: 'keep' or 'reset'",
        F.one_of(F.registry("lie_unitary.principal_branch", "REFRESH_STATES")), identity=_refresh),
    "lambda_optimizer": F.Field(
        "sgd", "the guRNN's λ optimizer: 'sgd' (the original code's) or 'rmsprop'",
        F.one_of(F.registry("lie_unitary.experiments.optimizers", "OPTIMIZERS")), identity=_lambda),
    "lr_drops": F.Field((), "updates from which every rate gets one more lr_drop_factor",
                        F.tuple_of(F.integer(0), nonempty=False, example="(45000, 65000)")),
    "lr_drop_factor": F.Field(0.1, "the factor of each drop", _NONNEGATIVE),
    "num_updates": F.Field(50_000, "updates per replicate (the paper's 10 epochs of 100,000 "
                           "sequences); a larger value extends finished units", _POSITIVE,
                           identity=False),
    "num_replicates": F.Field(3, "replicates per unit, one vmapped program", _POSITIVE),
    "batch_size": F.Field(20, "sequences per update", _POSITIVE),
    "data_parallel": F.Field(0, "devices splitting each replicate's batch (image tasks: the "
                             "evaluation's too); 0: the most that divide the batches. Part of "
                             "a unit: its float sums differ", F.integer(0)),
    "rmsprop_decay": F.Field(0.9, "RMSProp's decay (no momentum)", F.number(0.0, below=1.0)),
    "rmsprop_eps": F.Field(1e-10, "RMSProp's epsilon", _NONNEGATIVE),
    "rmsprop_eps_in_sqrt": F.Field(True, "epsilon under the square root (TensorFlow's, "
                                   "optax's) or outside (PyTorch's)", F.boolean),
    "rmsprop_initial_scale": F.Field(1.0, "RMSProp's initial mean square: 1 TensorFlow's, 0 "
                                     "optax's and PyTorch's", _NONNEGATIVE),
    "num_train": F.Field(100_000, "training sequences per replicate, the same each epoch; 0: "
                         "fresh", F.integer(0)),
    "val_every": F.Field(150, "updates between validations (the paper: 150)", _POSITIVE),
    "val_size": F.Field(1_000, "validation sequences of the curve", _POSITIVE),
    "eval_size": F.Field(10_000, "validation and test sequences at the end", _POSITIVE),
    "eval_batch_size": F.Field(1_000, "divides val_size and eval_size; sets the sets' "
                               "sequences", _POSITIVE),
    "eval_seed": F.Field(1234, "the validation and test sets, shared by all units", F.integer(0)),
    "unroll": F.Field(1, "time steps per loop iteration: speed, but part of a unit (XLA "
                      "rounding)", _POSITIVE),
    "dataset": F.Field("mnist", "image tasks: 'mnist', 'fashion_mnist', 'kmnist', or a folder "
                       "of the four IDX files", F.string, identity=_images),
    "data_dir": F.Field("", "image tasks: the IDX files' folder; '': $LIE_UNITARY_DATA_DIR/"
                        "<dataset> (unset: ~/.cache/lie_unitary/<dataset>), or Debian's "
                        "/usr/share/datasets/fashion-mnist", F.string, identity=False),
    "download": F.Field(False, "image tasks: fetch a missing dataset (md5-checked) first",
                        F.boolean, identity=False),
    "permutation_seed": F.Field(92916, "the permuted task's pixel order (expRNN's)",
                                F.integer(0), identity=lambda c, m: c.task == "permuted"),
    "num_validation": F.Field(5000, "image tasks: the last this many training images "
                              "validate", F.integer(1), identity=_images),
    "param_budget": F.Field("", "image tasks: '' or '16k', '69k', '137k' (`BUDGETS`)",
                            F.one_of(("",) + tuple(BUDGETS)), identity=False),
}


def defaults() -> ml_collections.ConfigDict:
  """The paper's adding problem at T = 100: every field at its default (`FIELDS`)."""
  return F.defaults(FIELDS)


def get_config(name: str = "adding") -> ml_collections.ConfigDict:
  """The named config `name` (`NAMED_CONFIGS`); ValueError for another name."""
  return F.load_config("rnn", name)
