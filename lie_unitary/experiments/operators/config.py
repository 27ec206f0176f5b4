r"""Learning unitary operators y = Ux + ε (paper §3, Tables 1-2, Figure 2, appendix B).

Run a variant from any directory (a bare name is a variant of this file)::

    python -m lie_unitary.experiments.operators --config=VARIANT --workdir=runs/VARIANT
    python scripts/learn_unitary.py \
        --config=lie_unitary/experiments/operators/config.py:VARIANT --workdir=runs/VARIANT

Any field can be narrowed from the command line, e.g. ``--config.n_values='(6,)'
--config.num_replicates=3``. A run writes WORKDIR/results.jsonl and
WORKDIR/curves.jsonl, resumes where it stopped, and ends by rendering
WORKDIR/report.md (``--report_only`` re-renders it). On a CPU, ``--num_workers=2``
(or the core count) shares the units among worker processes. Flags, workdir layout,
resume: docs/experiments.md. Measured results and runtimes of every variant:
docs/reproduction.md.

- table1: Table 1 as the paper ran it: SGD lr 1e-3, batches of 20, 18 replicates
  (generators lie/qr/composition cycled), n ∈ {3, 6, 8, 14, 20}, projection,
  arjovsky, lie_algebra, plus true, rand and the least-squares fit. Epochs per n:
  `num_epochs` below, 1/1/3/3/4 at n = 3/6/8/14/20.
    python -m lie_unitary.experiments.operators --config=table1 --workdir=runs/table1
  Runtime: docs/reproduction.md, "Table 1 as the paper ran it". One epoch per n
  instead: add ``--config.num_epochs='((0,1),)' --num_workers=2`` (docs/reproduction.md,
  "Table 1 at one epoch per n").
- table1_rmsprop: the same with RMSProp (decay 0.9), one epoch per n.
    python -m lie_unitary.experiments.operators --config=table1_rmsprop \
        --workdir=runs/table1_rmsprop
  Runtime: docs/reproduction.md, "RMSProp beside SGD".
- table2: arjovsky vs lie_restricted vs lie_algebra at n ∈ {8, 14, 20}, SGD, the
  same epochs as table1. Run it with table1's --workdir (and the same replicates):
  arjovsky and lie_algebra are then reused and only lie_restricted trains.
    python -m lie_unitary.experiments.operators --config=table2 --workdir=runs/table1
  Runtime: docs/reproduction.md, "Table 1 as the paper ran it".
- basis_change: appendix B at n = 6: rows c ∈ {0, 5, 10, 20} (M ~ U(-c, c), drawn
  once per c), columns lr = 1e-3 / {1, 5²/2, 10²/2, 20²/2} as the original code, target
  λ ~ N(0, 0.01²), 3 replicates, one epoch.
    python -m lie_unitary.experiments.operators --config=basis_change \
        --workdir=runs/basis_change
  Runtime: docs/reproduction.md, "Appendix B".
- large: n ∈ {32, 64, 128}, haar targets, all approaches, RMSProp, 3 replicates,
  one epoch: what the paper could not afford.
    python -m lie_unitary.experiments.operators --config=large --workdir=runs/large \
        --num_workers=2
  Runtime: docs/reproduction.md, "Beyond the paper: n = 32, 64, 128".
- orthogonal: real SO(n) targets (haar, lie) with real x and noise, so(n)
  coefficients vs projection onto O(n), n ∈ {6, 20, 64}, RMSProp, 6 replicates,
  one epoch.
    python -m lie_unitary.experiments.operators --config=orthogonal \
        --workdir=runs/orthogonal
  Runtime: docs/reproduction.md, "Beyond the paper: real SO(n) targets".
- smoke: a tiny table1 (n ∈ {3, 4}, 2,000 pairs, 3 replicates), nearly all
  compilation; the tests use it.
    python -m lie_unitary.experiments.operators --config=smoke --workdir=runs/smoke
  Runtime: docs/reproduction.md, "Commands".
"""

import ml_collections

VARIANTS = ("table1", "table1_rmsprop", "table2", "basis_change", "large", "orthogonal",
            "smoke")

# Epochs per n that land lie_algebra and arjovsky in the band of the paper's Tables 1-2
# with SGD lr 1e-3 (see docs/reproduction.md; one epoch is too few from n = 8 on).
_TABLE1_EPOCHS = ((3, 1), (6, 1), (8, 3), (14, 3), (20, 4))


def get_config(variant: str = "table1") -> ml_collections.ConfigDict:
  """The config of `variant` (one of `VARIANTS`)."""
  if variant not in VARIANTS:
    raise ValueError(f"unknown variant {variant!r}; expected one of {VARIANTS}.")
  c = ml_collections.ConfigDict()
  # The variant's name (recorded in the launch file WORKDIR/launches/NNNN-<time>.json;
  # not used by the computation).
  c.variant = variant
  # 'complex': U(n) targets, complex x and noise. 'real': SO(n) targets, real x and noise.
  c.field = "complex"
  # Matrix sizes n.
  c.n_values = (3, 6, 8, 14, 20)
  # What to fit: parametrizations (lie_algebra, lie_restricted, arjovsky, projection,
  # and the principal-branch variants of lie_algebra: lie_zero_init, lie_haar_init,
  # lie_recentred, lie_rebased, lie_rebased_orthonormal; so_algebra,
  # projection_orthogonal for field='real')
  # and baselines: true (the target), rand (another draw of the generator), lstsq
  # (least squares on the training pairs, unconstrained).
  c.approaches = ("true", "rand", "lstsq", "projection", "arjovsky", "lie_algebra")
  # Target generators, cycled over replicates (replicate r uses generators[r % len]):
  # qr, haar, lie, composition (complex); haar, lie (real).
  c.generators = ("lie", "qr", "composition")
  # Independent replicates (target, data, init) per setting, as one vmapped program.
  c.num_replicates = 18
  # Epochs per n as (n, epochs) pairs; an entry (0, e) is the default for every n
  # not listed. Each epoch visits the num_train pairs in a fresh order.
  c.num_epochs = _TABLE1_EPOCHS
  # Pairs per step.
  c.batch_size = 20
  # 'sgd' (as the paper ran it) or 'rmsprop' (no momentum).
  c.optimizer = "sgd"
  # Step size (appendix B divides it by each of lr_divisors).
  c.learning_rate = 1e-3
  # RMSProp's decay of the mean square.
  c.rmsprop_decay = 0.9
  # 'complex64' (float32 parameters) or 'complex128' (float64; enables jax_enable_x64).
  # For field='real' the matching real dtype is used.
  c.dtype = "complex64"
  # Root seed: replicate r at size n uses fold_in(fold_in(key(seed), n), r), the same
  # target and data for every approach.
  c.seed = 0
  # Training pairs per replicate (the paper: 10⁶ = 50,000 batches of 20).
  c.num_train = 1_000_000
  # Validation pairs (full set evaluated at the end).
  c.num_val = 100_000
  # Test pairs.
  c.num_test = 100_000
  # Steps between validation points (the paper: 250); divides num_train // batch_size.
  c.val_every = 250
  # Validation pairs used for the curve during training (the first ones of the set).
  c.val_subsample = 10_000
  # Standard deviation of each real component of the noise ε.
  c.noise_std = 0.01
  # Std of the target λ of the 'lie' generator (1 in §3; 0.01 in appendix B).
  c.lie_target_std = 1.0
  # Appendix B: c of the change of basis M ~ U(-c, c) (n² × n²); 0 = standard basis.
  # Values other than (0,) need approaches ('lie_algebra',) (plus baselines).
  c.basis_scales = (0.0,)
  # Appendix B: learning rates learning_rate / d for each d here.
  c.lr_divisors = (1.0,)
  # 'constant', or 'cosine': the rate decays to 0 over the run (one schedule for all
  # approaches; a unit's identity includes it when it is not 'constant').
  c.lr_schedule = "constant"
  # lie_recentred and lie_rebased(_orthonormal): refresh the chart (re-centre onto the principal
  # branch / re-base U₀ ← U, λ ← 0) before every step s with s % refresh_every == 0,
  # s = 0 included; 0 = never. Other approaches ignore it.
  c.refresh_every = 100
  # What a refresh does to the optimizer's moments: 'keep' or 'reset' (step counts,
  # and so the schedule, are kept either way).
  c.refresh_state = "keep"

  if variant == "table1_rmsprop":
    c.optimizer = "rmsprop"
    c.num_epochs = ((0, 1),)
  elif variant == "table2":
    c.n_values = (8, 14, 20)
    # The baselines as in table1 (lstsq included), so that run into table1's workdir
    # every unit but lie_restricted is table1's own and is reused.
    c.approaches = ("true", "rand", "lstsq", "arjovsky", "lie_restricted", "lie_algebra")
  elif variant == "basis_change":
    c.n_values = (6,)
    c.approaches = ("true", "rand", "lie_algebra")
    c.generators = ("lie",)
    c.lie_target_std = 0.01
    c.num_replicates = 3
    c.num_epochs = ((0, 1),)
    c.basis_scales = (0.0, 5.0, 10.0, 20.0)
    c.lr_divisors = (1.0, 5.0 ** 2 / 2, 10.0 ** 2 / 2, 20.0 ** 2 / 2)
  elif variant == "large":
    c.n_values = (32, 64, 128)
    c.approaches = ("true", "rand", "lstsq", "projection", "arjovsky", "lie_restricted",
                    "lie_algebra", "lie_zero_init", "lie_haar_init", "lie_recentred",
                    "lie_rebased", "lie_rebased_orthonormal")
    c.generators = ("haar",)
    c.optimizer = "rmsprop"
    c.num_replicates = 3
    c.num_epochs = ((0, 1),)
  elif variant == "orthogonal":
    c.field = "real"
    c.n_values = (6, 20, 64)
    c.approaches = ("true", "rand", "lstsq", "projection_orthogonal", "so_algebra")
    c.generators = ("haar", "lie")
    c.optimizer = "rmsprop"
    c.num_replicates = 6
    c.num_epochs = ((0, 1),)
  elif variant == "smoke":
    c.n_values = (3, 4)
    c.num_replicates = 3
    c.num_epochs = ((0, 1), (4, 2))
    c.num_train = 2_000
    c.num_val = 500
    c.num_test = 500
    c.val_every = 25
    c.val_subsample = 200
  return c
