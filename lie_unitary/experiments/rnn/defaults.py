"""The RNN family's default config and per-model tables, light enough for config files.

Config files start from `get_config()` (the paper's adding problem, §4) and set their
experiment's fields; importing this module loads ml_collections only. What each field
accepts and whether it enters a unit's identity: `lie_unitary.experiments.rnn.config`.
"""

import math

import ml_collections

# The experiments of configs/ that ``--config=NAME`` knows: NAME -> file name.
NAMED_CONFIGS = {"adding": "adding", "memory": "memory", "copy_long": "copy_long",
                 "adding_long": "adding_long", "smoke": "rnn_smoke",
                 "pixel_mnist": "pixel_mnist", "permuted_mnist": "permuted_mnist"}
# Parameter budgets of the sequential-image tables: the hidden size of each model whose
# trainable count is nearest to that of expRNN's orthogonal RNN of 170 / 360 / 512 units
# (16K, 69K, 137K parameters on MNIST; `config.budget_hidden_size` computes them).
BUDGETS = {"16k": {"gurnn": 116, "orthogonal": 170, "lstm": 62},
           "69k": {"gurnn": 250, "orthogonal": 360, "lstm": 129},
           "137k": {"gurnn": 358, "orthogonal": 512, "lstm": 183}}


def _model(**fields) -> ml_collections.ConfigDict:
  return ml_collections.ConfigDict(fields)


def paper_models(task: str) -> ml_collections.ConfigDict:
  """The per-model settings of the paper (§4) and the original runs for 'adding' or
  'memory' ('copy' is 'memory').

  Each entry's fields: hidden_size (complex units for guRNN/free, real otherwise), beta
  (β in f(β U h + V x + b)), activation (relu, tanh, identity or modrelu), learning_rate
  (RMSProp, every parameter but λ or μ), lambda_learning_rate (λ's, or the orthogonal
  RNN's μ), clip_value (by value; 0 = off). The paper: 30 units (ruRNN 512 adding / 128
  memory); β = 1.4 (adding) / 1.05 (memory) for gurnn_beta and free; IRNN at 1e-4;
  no clipping for the unitary models; relu (adding) / tanh (memory).

  Raises:
    ValueError: another task.
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
      # Beyond the paper: expRNN's orthogonal RNN (a real state of the guRNN's size); μ
      # at a tenth of the rate.
      "orthogonal": _model(hidden_size=60, learning_rate=1e-3, lambda_learning_rate=1e-4,
                           clip_value=0.0),
  })


def image_models(budget: str = "16k") -> ml_collections.ConfigDict:
  """The per-model settings of the sequential-image tasks at a parameter budget.

  The orthogonal RNN as expRNN's code ran it on permuted MNIST (RMSProp at 1e-3, its
  μ at 1e-4); the guRNN (modReLU, β = 1) with λ at a tenth of the rate likewise; the
  LSTM at 1e-3, clipped at 1. Hidden sizes: `BUDGETS[budget]`.

  Raises:
    ValueError: an unknown budget.
  """
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
  # The experiment's name (recorded in the launch file; not used by the computation).
  c.variant = ""
  # The problem: 'adding', 'memory' ('copy' is an alias), or the image tasks 'pixel'
  # and 'permuted'. `models` holds the task's per-model settings: set both together.
  c.task = "adding"
  # Models: gurnn (β = 1), gurnn_beta, urnn (ruRNN), lstm, irnn, tanh, free (the
  # guRNN's recurrence with an unconstrained 2n×2n matrix), orthogonal (expRNN's).
  c.model = ("gurnn_beta",)
  # Sequence lengths T (memory: T - 1 blanks, length T + 20; image tasks: the pixels).
  c.T = (100,)
  # Per-model settings (`paper_models`, `image_models`).
  c.models = paper_models("adding")
  # guRNN / ruRNN initial state: 'random' (U(±sqrt(3/(2n))), redrawn each update) or 'zeros'.
  c.h0 = "random"
  # Standard deviation of the guRNN's λ at init (N(0, std²) as the paper: 1); 0 = λ = 0.
  c.lambda_init_std = 1.0
  # guRNN λ init: 'normal' (N(0, lambda_init_std²), the paper), 'phases' (U =
  # diag(e^{iθ}), θ ~ U(-r, r), r = lambda_phase_range: Henaff et al.'s init for the
  # copy task), 'zeros' (U = I) or 'haar' (the principal logarithm of a Haar-random U).
  c.lambda_init = "normal"
  # With lambda_init='phases': r (π: the whole circle; π/2: the eigenphases of expRNN's
  # Cayley init of the orthogonal RNN).
  c.lambda_phase_range = math.pi
  # The readout's initialisation: 'lecun_normal' (flax's Dense: LeCun normal kernel,
  # zero bias) or 'torch' (PyTorch's nn.Linear, as expRNN's code: kernel and bias
  # ~ U(±1/√H)).
  c.readout_init = "lecun_normal"
  # guRNN λ refresh every lambda_refresh_every updates (before update u, u % every ==
  # 0), U unchanged: 'none', 'recentre' (λ ← the principal logarithm's coefficients) or
  # 'rebase' (U₀ ← U₀ · U(λ), λ ← 0: the dynamic trivialization).
  c.lambda_refresh = "none"
  # Updates between λ refreshes.
  c.lambda_refresh_every = 100
  # At a refresh, the optimizer statistics of λ: 'keep' or 'reset' (step counts kept).
  c.lambda_refresh_state = "keep"
  # Optimizer of the guRNN's λ: 'sgd' (plain steps at lambda_learning_rate, as the
  # original code) or 'rmsprop' (its own RMSProp).
  c.lambda_optimizer = "sgd"
  # Updates from which every learning rate is multiplied by lr_drop_factor (update u ≥
  # d, counted from 0, gets one more factor).
  c.lr_drops = ()
  # Factor of each learning-rate drop.
  c.lr_drop_factor = 0.1
  # Updates (batches) per replicate; 50,000 = 10 epochs of 100,000 sequences as the
  # paper. Where a unit stops, not what it is: a larger value extends finished units.
  c.num_updates = 50_000
  # Independent replicates per unit (replicate r: seed fold_in(seed, r)), one program.
  c.num_replicates = 3
  # Sequences per update.
  c.batch_size = 20
  # Devices that split each replicate's batch (each takes batch_size / data_parallel
  # sequences; gradients averaged; the image tasks split their evaluation batches too).
  # 0: every device (the launcher makes one per CPU core), or the most that divide the
  # batches. The split is part of a unit: its float sums, and so its numbers, differ.
  c.data_parallel = 0
  # RMSProp decay (no momentum).
  c.rmsprop_decay = 0.9
  # RMSProp epsilon (see rmsprop_eps_in_sqrt).
  c.rmsprop_eps = 1e-10
  # Add rmsprop_eps under the square root (TensorFlow's and optax's) or, False, outside
  # it (PyTorch's RMSprop, which expRNN's code runs).
  c.rmsprop_eps_in_sqrt = True
  # RMSProp's initial mean square: 1.0 as TensorFlow's RMSPropOptimizer (the original
  # code), 0 as optax.
  c.rmsprop_initial_scale = 1.0
  # Training sequences per replicate (visited in the same order each epoch); 0 = fresh every update.
  c.num_train = 100_000
  # Validate every this many updates (the paper: 150).
  c.val_every = 150
  # Sequences in the fixed validation subsample of the curve.
  c.val_size = 1_000
  # Sequences in the full validation and test sets, evaluated at the end.
  c.eval_size = 10_000
  # Sequences per evaluation batch (a divisor of val_size and eval_size; it sets which
  # sequences the fixed sets hold).
  c.eval_batch_size = 1_000
  # Root seed of initialisation and training data.
  c.seed = 0
  # Seed of the validation and test sets (shared by all models and replicates).
  c.eval_seed = 1234
  # Time steps per iteration of the compiled loop: a speed setting, but part of a
  # unit's identity (XLA may fuse and round differently).
  c.unroll = 1
  # Image tasks: 'mnist', 'fashion_mnist', 'kmnist', or the path of any folder holding
  # the four IDX files.
  c.dataset = "mnist"
  # Image tasks: where the dataset's IDX files are; '' = $LIE_UNITARY_DATA_DIR/<dataset>
  # (unset: ~/.cache/lie_unitary/<dataset>), or Debian's Fashion-MNIST package
  # (/usr/share/datasets/fashion-mnist) when installed.
  c.data_dir = ""
  # Image tasks: fetch a missing mnist, fashion_mnist or kmnist from its mirrors (md5
  # checked) into data_dir, or the default folder above, before anything else.
  c.download = False
  # The permuted task's fixed pixel order: numpy.random.RandomState(seed).permutation (expRNN's).
  c.permutation_seed = 92916
  # Image tasks: the last this many training images are the validation set.
  c.num_validation = 5000
  # Image tasks: '' (each model's hidden_size), or a parameter budget ('16k', '69k',
  # '137k') that sizes every model by `BUDGETS`.
  c.param_budget = ""
  return c
