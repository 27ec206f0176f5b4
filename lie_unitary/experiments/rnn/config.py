r"""RNNs on the adding and memory problems (paper §4, Figure 3).

Run a variant (from any directory; a bare name is this file's variant):

    python -m lie_unitary.experiments.rnn --config=VARIANT --workdir=runs/NAME
    python scripts/train_rnn.py --config=lie_unitary/experiments/rnn/config.py:VARIANT \
        --workdir=runs/NAME

Any field can be overridden, e.g. ``--config.num_replicates=1``,
``--config.models.gurnn_beta.learning_rate=1e-2``; list fields are tuples: repeat the
flag or give a comma list (``--config.model=gurnn --config.model=lstm`` or
``--config.model=gurnn,lstm``; ``--config.lr_drops='()'`` for none). Every (model, T)
pair is one unit; all `num_replicates` replicates of a unit train as one vmapped
program (sharded over the devices); a rerun skips finished units and resumes
unfinished ones from their checkpoints; a rerun with any changed setting (a learning
rate, a size, a seed) computes new units beside the old ones; a larger
`num_updates` extends finished units from their last checkpoint.

- adding: T = 100, guRNN_β (β = 1.4, relu), 3 replicates, 50,000 updates of batch 20.
    python -m lie_unitary.experiments.rnn --config=adding --workdir=runs/adding
  ~7 min on 2 shared CPU cores; measured: median final val MSE 0.0047 (best 0.0028);
  target ≤ 0.01 (the original run: 0.0100).
  Figure 3 (left): --config.model=gurnn,lstm,irnn,tanh --config.num_replicates=1 into
  the same workdir (1-5 min per model; add urnn for the ruRNN, n = 512: ~1.5 h).
- memory: T = 100, guRNN_β (β = 1.05, tanh), 3 replicates, 50,000 updates.
    python -m lie_unitary.experiments.rnn --config=memory --workdir=runs/memory
  ~7 min; measured: median final val cross-entropy 0.0045 (best 0.0039; the original
  run: 0.0058); with --config.lambda_optimizer=rmsprop it plateaus near 0.025.
  Figure 3 (right): the same --config.model list (urnn: n = 128, ~25 min). LSTM and tanh
  RNN stay at the baseline 0.173.
- copy_long: memory task at T = 1000 and 2000 (beyond the paper; baselines 0.0204 and
  0.0103): guRNN₁ n = 64, modReLU, diagonal-phases λ init, batch 128, h0 = 0, RMSProp
  lr 2e-4 (λ 2e-5). Measured (1 replicate, 2 shared cores): T = 1000 val 3.8e-5 after
  1,800 updates (18 min; replicate 1: 5.8e-5); T = 2000 val 5.5e-5 after 2,500 updates
  (51 min).
    python -m lie_unitary.experiments.rnn --config=copy_long --workdir=runs/copy_long
- adding_long: adding task at T = 750 and 1000 (beyond the paper; target MSE ≤ 1e-3):
  guRNN₁ from U = I, relu, λ in RMSProp, lr ÷10 at 45k and 65k of 80,000 updates.
  Measured: val MSE 3.1e-4 (T = 750, 17 min) and 3.7e-4 / 8.1e-4 (T = 1000,
  replicates 0 / 1, 20-28 min each).
    python -m lie_unitary.experiments.rnn --config=adding_long --workdir=runs/adding_long
- smoke: a few seconds per model on the adding task at T = 10 (tests use it).
    python -m lie_unitary.experiments.rnn --config=smoke --workdir=/tmp/rnn_smoke

On a CPU, `--num_workers=2` (or the core count) trains the units in parallel
processes: the Figure 3 set (gurnn,gurnn_beta,lstm,irnn,tanh, 1 replicate, both tasks)
took 8m58s on 2 cores that way. All measured numbers and the throughput table:
docs/rnn.md. Report only: python -m lie_unitary.experiments.rnn --workdir=runs/adding
--report_only.
"""

import ml_collections

VARIANTS = ("adding", "memory", "copy_long", "adding_long", "smoke")


def paper_models(task: str) -> ml_collections.ConfigDict:
  """The per-model settings of the paper (§4) and the original runs for `task`.

  hidden_size: 30 (complex units for guRNN/free, real for LSTM/IRNN/tanh), ruRNN 512
  (adding) / 128 (memory). beta: 1 for gurnn, 1.4 (adding) / 1.05 (memory) for
  gurnn_beta and free. learning_rate: 1e-4 for IRNN, 1e-3 otherwise. clip_value: none
  for the unitary models and free, 1.0 (by value) for the others. activation: relu
  (adding) / tanh (memory) for gurnn, gurnn_beta and free.
  """
  beta = {"adding": 1.4, "memory": 1.05}[task]
  activation = {"adding": "relu", "memory": "tanh"}[task]

  def gurnn(beta, with_lambda=True):
    m = ml_collections.ConfigDict()
    # Complex state units n (the state is [Re h, Im h], 2n reals).
    m.hidden_size = 30
    # β in front of U: the recurrence is f(β U h + V x + b).
    m.beta = beta
    # Nonlinearity: relu, tanh, identity, or modrelu (per complex unit, beyond the
    # paper: the copy task at long T).
    m.activation = activation
    # RMSProp learning rate of every parameter but λ.
    m.learning_rate = 1e-3
    if with_lambda:
      # Learning rate of λ (later unitary-RNN work uses a smaller one for the
      # recurrent matrix, e.g. expRNN on copy: 2e-4 and 2e-5).
      m.lambda_learning_rate = 1e-3
    # Gradient clipping by value (0 = off; the paper clips only lstm/irnn/tanh).
    m.clip_value = 0.0
    return m

  def plain(hidden_size, learning_rate, clip_value):
    m = ml_collections.ConfigDict()
    # State size (real units; the ruRNN's: complex units).
    m.hidden_size = hidden_size
    # RMSProp learning rate.
    m.learning_rate = learning_rate
    # Gradient clipping by value to [-clip_value, clip_value] (0 = off).
    m.clip_value = clip_value
    return m

  return ml_collections.ConfigDict({
      # guRNN₁: the general unitary RNN with β = 1.
      "gurnn": gurnn(1.0),
      # guRNN_β: the same with the paper's β per task.
      "gurnn_beta": gurnn(beta),
      # The guRNN's recurrence with an unconstrained 2n×2n matrix (no λ), trained like it.
      "free": gurnn(beta, with_lambda=False),
      # ruRNN: Arjovsky et al.'s 7n-parameter unitary composition with modReLU.
      "urnn": plain({"adding": 512, "memory": 128}[task], 1e-3, 0.0),
      # flax's OptimizedLSTMCell.
      "lstm": plain(30, 1e-3, 1.0),
      # IRNN: relu RNN started at the identity.
      "irnn": plain(30, 1e-4, 1.0),
      # tanh RNN.
      "tanh": plain(30, 1e-3, 1.0),
  })


def get_config(variant: str = "adding") -> ml_collections.ConfigDict:
  """The config of `variant`: adding | memory | copy_long | adding_long | smoke."""
  if variant not in VARIANTS:
    raise ValueError(f"unknown variant {variant!r}; choose from {', '.join(VARIANTS)}.")
  task = "adding" if variant in ("adding", "adding_long", "smoke") else "memory"
  c = ml_collections.ConfigDict()
  # Which problem: 'adding' or 'memory' ('copy' is an alias of 'memory'). The variant
  # fills `models` with this task's per-model settings: change the task by variant.
  c.task = task
  # Models (a tuple): gurnn (β = 1), gurnn_beta, urnn (ruRNN), lstm, irnn, tanh, free
  # (the guRNN's recurrence with an unconstrained 2n×2n matrix).
  c.model = ("gurnn_beta",)
  # Sequence lengths T (a tuple; memory: T - 1 blanks, length T + 20).
  c.T = (100,)
  # Per-model settings (hidden_size, beta, activation, learning_rate,
  # lambda_learning_rate, clip_value), the paper's for the task; see `paper_models`.
  c.models = paper_models(task)
  # guRNN / ruRNN initial state: 'random' (U(±sqrt(3/(2n))), redrawn each update) or 'zeros'.
  c.h0 = "random"
  # Standard deviation of the guRNN's λ at init (N(0, std²) as the paper: 1); 0 = λ = 0, U = I.
  c.lambda_init_std = 1.0
  # guRNN λ init: 'normal' (N(0, lambda_init_std²), the paper), 'phases' (U = diag(e^{iθ}),
  # θ ~ U(-π, π): Henaff et al.'s init for the copy task), 'zeros' (U = I) or 'haar' (the
  # principal logarithm of a Haar-random U: every eigenphase of U's chart within ±π).
  c.lambda_init = "normal"
  # guRNN λ refresh every lambda_refresh_every updates (before update u, u % every == 0,
  # u = 0 included), U unchanged: 'none', 'recentre' (λ ← coefficients of the principal
  # logarithm of U(λ)) or 'rebase' (U = U₀ · U(λ) with a base U₀ held as state:
  # (U₀, λ) ← (U₀ · U(λ), 0), the dynamic trivialization); see lie_unitary.principal_branch.
  c.lambda_refresh = "none"
  # Updates between refreshes (a unit's identity holds it only when lambda_refresh is set).
  c.lambda_refresh_every = 100
  # At a refresh, the optimizer statistics of λ: 'keep' or 'reset' (restart; step counts kept).
  c.lambda_refresh_state = "keep"
  # Optimizer of the guRNN's λ: 'sgd' (plain gradient steps at lambda_learning_rate, as
  # the original code; on memory T = 100 it reached 0.0045 where 'rmsprop' plateaued
  # near 0.025, see docs/rnn.md) or 'rmsprop' (its own RMSProp, as the rest's).
  c.lambda_optimizer = "sgd"
  # Updates (a tuple) from which every learning rate is multiplied by lr_drop_factor
  # (the update with index u ≥ d, counted from 0, gets one more factor).
  c.lr_drops = ()
  # Factor of each learning-rate drop.
  c.lr_drop_factor = 0.1
  # Updates (batches) per replicate; 50,000 = 10 epochs of 100,000 sequences as the
  # paper. Where a unit stops, not what it is: a larger value extends finished units.
  c.num_updates = 50_000
  # Independent replicates per unit (replicate r: seed fold_in(seed, r)), trained as
  # one vmapped program sharded over the devices.
  c.num_replicates = 3
  # Sequences per update.
  c.batch_size = 20
  # Devices that split each replicate's batch (data parallelism: each computes the
  # gradient of its batch_size / data_parallel sequences, then the mean over them).
  # 1: a replicate runs on one device. With d > 1 the devices (jax.devices(): several
  # processes with --num_processes, or in one process e.g.
  # XLA_FLAGS=--xla_force_host_platform_device_count=2 on CPU) form a (count / d, d)
  # mesh of replicates × batch shards. Part of a unit's identity when > 1: each shard
  # draws its own random initial states, so the numbers differ from one device's.
  c.data_parallel = 1
  # RMSProp decay (no momentum), as the paper.
  c.rmsprop_decay = 0.9
  # RMSProp epsilon (added under the square root; TF's default).
  c.rmsprop_eps = 1e-10
  # Initial mean square of RMSProp: 1.0 as TF's RMSPropOptimizer (the original code), 0 as optax.
  c.rmsprop_initial_scale = 1.0
  # Training sequences per replicate (visited in the same order each epoch); 0 = fresh
  # every update.
  c.num_train = 100_000
  # Validate every this many updates (the paper: 150).
  c.val_every = 150
  # Sequences in the fixed validation subsample used during training.
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
  # Time steps per iteration of the compiled scan loop: a speed setting, but part of a
  # unit's identity, since XLA may then fuse (and round) differently.
  c.unroll = 1
  # How the guRNN, free, IRNN and tanh RNN run their loops over time: 'scan' (lax.scan,
  # the fastest on CPU) or 'pallas' (each loop in one fused Pallas kernel, for GPUs,
  # where a scan is launch-bound at small batch; slow, interpreted, on CPU). Other
  # models always scan. Part of those models' identity when 'pallas' (other rounding).
  c.kernel = "scan"

  if variant == "copy_long":
    # Beyond the paper, in the setting of later unitary-RNN work (expRNN: batch 128,
    # RMSProp 2e-4 / 2e-5 on the recurrent matrix, Henaff init, modReLU, h0 = 0).
    c.model = ("gurnn",)
    c.T = (1000, 2000)
    c.models.gurnn.hidden_size = 64
    c.models.gurnn.activation = "modrelu"
    c.models.gurnn.learning_rate = 2e-4
    c.models.gurnn.lambda_learning_rate = 2e-5
    c.batch_size = 128
    c.h0 = "zeros"
    c.lambda_init = "phases"
    c.lambda_optimizer = "rmsprop"
    c.num_updates = 3_000
    c.num_replicates = 1
  elif variant == "adding_long":
    # Beyond the paper: guRNN₁ started at U = I (λ = 0), relu, h0 = 0 — an IRNN whose
    # recurrence stays unitary, so it cannot blow up as the IRNN does at T = 1000 —
    # λ in RMSProp, and the learning rate divided by 10 at 45,000 and 65,000 updates.
    c.model = ("gurnn",)  # β = 1: relu with β = 1.4 over 750+ steps invites overflow
    c.T = (750, 1000)
    c.h0 = "zeros"
    c.models.gurnn.activation = "relu"
    c.lambda_init_std = 0.0
    c.lambda_optimizer = "rmsprop"
    c.num_updates = 80_000
    c.lr_drops = (45_000, 65_000)
    c.num_replicates = 1
  elif variant == "smoke":
    c.T = (10,)
    for m in c.models.values():
      m.hidden_size = 8
      m.learning_rate = 1e-2
      if "lambda_learning_rate" in m:
        m.lambda_learning_rate = 1e-2
    c.num_updates = 60
    c.num_replicates = 2
    c.val_every = 20
    c.val_size = 40
    c.eval_size = 80
    c.eval_batch_size = 40
    c.num_train = 0
  return c
