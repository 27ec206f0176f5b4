"""The RNN family's default config and per-model tables, for config files (no jax here).
What each field accepts and whether it enters a unit's identity: `rnn.config`."""

import math

import ml_collections

# The experiments of configs/ that ``--config=NAME`` knows: NAME -> file name.
NAMED_CONFIGS = {"adding": "adding", "memory": "memory", "copy_long": "copy_long",
                 "adding_long": "adding_long", "smoke": "rnn_smoke",
                 "pixel_mnist": "pixel_mnist", "permuted_mnist": "permuted_mnist"}
# Parameter budgets of the image tasks: each model's hidden size whose trainable count is
# nearest to expRNN's orthogonal RNN's (`config.budget_hidden_size` computes them).
BUDGETS = {"16k": {"gurnn": 116, "orthogonal": 170, "lstm": 62},
           "69k": {"gurnn": 250, "orthogonal": 360, "lstm": 129},
           "137k": {"gurnn": 358, "orthogonal": 512, "lstm": 183}}


# Every entry also has clip_norm: > 0 scales the gradient of all but λ or μ to that
# global norm first (0 = off, and then not in the unit's identity).
_model = lambda **fields: ml_collections.ConfigDict({**fields, "clip_norm": 0.0})


def paper_models(task: str) -> ml_collections.ConfigDict:
  """The paper's per-model settings (§4) for 'adding' or 'memory' ('copy').

  Each entry's fields: hidden_size (complex units for guRNN/free), beta (β in
  f(β U h + V x + b)), activation, learning_rate (RMSProp, all but λ or μ),
  lambda_learning_rate (λ's or the orthogonal RNN's μ), clip_value (by value; 0 = off),
  clip_norm (by global norm; 0 = off).
  Raises ValueError for another task.
  """
  name = {"copy": "memory"}.get(task, task)
  if name not in ("adding", "memory"):
    raise ValueError(f"paper_models: task {task!r} is not 'adding' or 'memory'.")
  beta = {"adding": 1.4, "memory": 1.05}[name]
  act = {"adding": "relu", "memory": "tanh"}[name]
  gurnn = dict(hidden_size=30, activation=act, learning_rate=1e-3, clip_value=0.0)
  return ml_collections.ConfigDict({
      "gurnn": _model(**gurnn, beta=1.0, lambda_learning_rate=1e-3),
      "gurnn_beta": _model(**gurnn, beta=beta, lambda_learning_rate=1e-3),
      "free": _model(**gurnn, beta=beta),
      "urnn": _model(hidden_size={"adding": 512, "memory": 128}[name], learning_rate=1e-3,
                     clip_value=0.0),
      "lstm": _model(hidden_size=30, learning_rate=1e-3, clip_value=1.0),
      "irnn": _model(hidden_size=30, learning_rate=1e-4, clip_value=1.0),
      "tanh": _model(hidden_size=30, learning_rate=1e-3, clip_value=1.0),
      # Beyond the paper: expRNN's orthogonal RNN (a real state of the guRNN's size).
      "orthogonal": _model(hidden_size=60, learning_rate=1e-3, lambda_learning_rate=1e-4,
                           clip_value=0.0),
  })


def image_models(budget: str = "16k") -> ml_collections.ConfigDict:
  """The image tasks' per-model settings, sized by `BUDGETS[budget]`: the orthogonal RNN
  as expRNN ran it on permuted MNIST, the guRNN likewise. ValueError: unknown budget."""
  if budget not in BUDGETS:
    raise ValueError(f"unknown parameter budget {budget!r}; expected one of {tuple(BUDGETS)}.")
  size = BUDGETS[budget]
  return ml_collections.ConfigDict({
      "gurnn": _model(hidden_size=size["gurnn"], beta=1.0, activation="modrelu",
                      learning_rate=1e-3, lambda_learning_rate=1e-4, clip_value=0.0),
      "orthogonal": _model(hidden_size=size["orthogonal"], learning_rate=1e-3,
                           lambda_learning_rate=1e-4, clip_value=0.0),
      "lstm": _model(hidden_size=size["lstm"], learning_rate=1e-3, clip_value=1.0)})


def get_config() -> ml_collections.ConfigDict:
  """The paper's adding problem at T = 100: every field of the family, with its meaning."""
  c = ml_collections.ConfigDict()
  c.variant = ""  # the experiment's name (recorded, not used by the computation)
  # 'adding', 'memory' ('copy'), or the image tasks 'pixel' and 'permuted'; set `models`
  # (the task's per-model settings: `paper_models`, `image_models`) with it.
  c.task = "adding"
  # gurnn (β = 1), gurnn_beta, urnn (ruRNN), lstm, irnn, tanh, free (the guRNN with an
  # unconstrained 2n×2n matrix), orthogonal (expRNN's).
  c.model = ("gurnn_beta",)
  c.T = (100,)  # sequence lengths (memory: T - 1 blanks, length T + 20; images: pixels)
  c.models = paper_models("adding")
  # guRNN / ruRNN initial state: 'random' (U(±sqrt(3/(2n))), redrawn each update) or 'zeros'.
  c.h0 = "random"
  c.lambda_init_std = 1.0  # std of the guRNN's λ at init (the paper: 1)
  # guRNN λ init: 'normal' (N(0, lambda_init_std²)), 'phases' (U = diag(e^{iθ}),
  # θ ~ U(-r, r), Henaff et al.'s), 'zeros' (U = I) or 'haar' (log of a Haar U).
  c.lambda_init = "normal"
  c.lambda_phase_range = math.pi  # r of 'phases' (π/2: expRNN's Cayley init's phases)
  # The readout's init: 'lecun_normal' (flax's Dense) or 'torch' (PyTorch's nn.Linear).
  c.readout_init = "lecun_normal"
  # The orthogonal RNN's expm(A(μ)): 'eigh' (faster on vmapped batches) or 'pade' (as
  # PyTorch's matrix_exp; a float32 W nearer orthogonal).
  c.orthogonal_expm = "eigh"
  # The LSTM's forget-gate bias at init (1: Jozefowicz et al. 2015's; 0: flax's zeros).
  c.lstm_forget_bias = 0.0
  # guRNN λ refresh before update u when u % lambda_refresh_every == 0, U unchanged:
  # 'none', 'recentre' (λ ← the principal log's coefficients) or 'rebase' (U₀ ← U₀ U(λ),
  # λ ← 0: the dynamic trivialization).
  c.lambda_refresh = "none"
  c.lambda_refresh_every = 100
  c.lambda_refresh_state = "keep"  # λ's optimizer statistics at a refresh: 'keep' or 'reset'
  # The guRNN's λ optimizer: 'sgd' (the original code's) or 'rmsprop' (its own).
  c.lambda_optimizer = "sgd"
  c.lr_drops = ()  # updates from which every learning rate gets one more lr_drop_factor
  c.lr_drop_factor = 0.1
  # Updates per replicate (50,000 = the paper's 10 epochs of 100,000 sequences); a larger
  # value extends finished units.
  c.num_updates = 50_000
  c.num_replicates = 3  # replicates per unit (r: seed fold_in(seed, r)), one program
  c.batch_size = 20
  # Devices that split each replicate's batch (image tasks: evaluation batches too); 0:
  # the most that divide the batches. Part of a unit: its float sums differ.
  c.data_parallel = 0
  c.rmsprop_decay = 0.9  # RMSProp has no momentum
  c.rmsprop_eps = 1e-10
  # rmsprop_eps under the square root (TensorFlow's, optax's) or outside (PyTorch's).
  c.rmsprop_eps_in_sqrt = True
  c.rmsprop_initial_scale = 1.0  # the initial mean square: 1 TensorFlow's, 0 optax's
  c.num_train = 100_000  # training sequences per replicate, the same each epoch; 0: fresh
  c.val_every = 150  # updates between validations (the paper: 150)
  c.val_size = 1_000  # validation sequences of the curve
  c.eval_size = 10_000  # validation and test sequences at the end
  c.eval_batch_size = 1_000  # divides val_size and eval_size; it sets the sets' sequences
  c.seed = 0  # initialisation and training data
  c.eval_seed = 1234  # the validation and test sets, shared by all units
  c.unroll = 1  # time steps per loop iteration: speed, but part of a unit (XLA rounding)
  # Image tasks: 'mnist', 'fashion_mnist', 'kmnist', or a folder of the four IDX files.
  c.dataset = "mnist"
  # Image tasks: the IDX files' folder; '': $LIE_UNITARY_DATA_DIR/<dataset> (unset:
  # ~/.cache/lie_unitary/<dataset>), or Debian's /usr/share/datasets/fashion-mnist.
  c.data_dir = ""
  c.download = False  # image tasks: fetch a missing dataset (md5-checked) first
  c.permutation_seed = 92916  # the permuted task's pixel order (expRNN's)
  c.num_validation = 5000  # image tasks: the last this many training images validate
  c.param_budget = ""  # image tasks: '' or '16k', '69k', '137k' (sizes from `BUDGETS`)
  return c
