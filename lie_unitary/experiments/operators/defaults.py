"""The operator-learning family's default config (paper §3), where config files start;
importing it loads ml_collections only. What each field accepts: `config.FIELDS`."""

import ml_collections

# The experiments of configs/ that ``--config=NAME`` knows: NAME -> file name.
NAMED_CONFIGS = {"table1": "table1", "table1_rmsprop": "table1_rmsprop", "table2": "table2",
                 "basis_change": "basis_change", "large": "large",
                 "orthogonal": "orthogonal", "smoke": "operators_smoke"}


def get_config() -> ml_collections.ConfigDict:
  """Table 1's protocol at n = 6, one epoch: every field of the family, with its meaning."""
  c = ml_collections.ConfigDict()
  c.variant = ""  # the experiment's name (recorded in the launch file only)
  # 'complex': U(n) targets, complex x and noise. 'real': SO(n) targets, real x and noise.
  c.field = "complex"
  c.n_values = (6,)  # matrix sizes n
  # What to fit: parametrizations of the field (`lie_unitary.PARAMETRIZATIONS`) and the
  # baselines true (the target), rand (another draw), lstsq (unconstrained least squares).
  c.approaches = ("true", "rand", "lstsq", "projection", "arjovsky", "lie_algebra")
  # Target generators, cycled over replicates (replicate r uses generators[r % len]):
  # qr, haar, lie, composition (complex); haar, lie (real).
  c.generators = ("lie", "qr", "composition")
  c.num_replicates = 18  # replicates (target, data, init) per setting, one vmapped program
  # Epochs per n as (n, epochs) pairs; (0, e) is the default for every n not listed.
  # Each epoch visits the num_train pairs in a fresh order.
  c.num_epochs = ((0, 1),)
  c.batch_size = 20  # pairs per step
  c.optimizer = "sgd"  # as the paper ran it, or 'rmsprop' (no momentum)
  c.learning_rate = 1e-3  # step size; each unit's: learning_rate / d for d in lr_divisors
  c.rmsprop_decay = 0.9  # RMSProp's decay of the mean square
  # 'complex64' (float32 parameters) or 'complex128' (float64; the unit runs with x64
  # enabled). For field='real' the matching real dtype.
  c.dtype = "complex64"
  # Root seed: replicate r at size n uses fold_in(fold_in(key(seed), n), r), the same
  # target and data for every approach.
  c.seed = 0
  c.num_train = 1_000_000  # training pairs per replicate (the paper: 10⁶ = 50,000 × 20)
  c.num_val = 100_000  # validation pairs (the whole set is evaluated at the end)
  c.num_test = 100_000  # test pairs
  # Steps between validation points (the paper: 250); divides num_train // batch_size.
  c.val_every = 250
  c.val_subsample = 10_000  # validation pairs of the curve (the first ones of the set)
  c.noise_std = 0.01  # standard deviation of each real component of the noise ε
  c.lie_target_std = 1.0  # std of the 'lie' generator's target λ (1 in §3; 0.01 in app. B)
  # Appendix B: c of the change of basis M ~ U(-c, c) (n² × n²); 0 = standard basis.
  # c > 0 needs approaches lie_algebra, lie_zero_init or lie_rebased (and baselines).
  c.basis_scales = (0.0,)
  c.lr_divisors = (1.0,)  # appendix B: one unit per learning rate learning_rate / d
  c.lr_schedule = "constant"  # or 'cosine': the rate decays to 0 over the run
  # Approaches that refresh their chart (lie_recentred, lie_rebased, ...): before every
  # step s with s % refresh_every == 0, s = 0 included; 0 = never.
  c.refresh_every = 100
  # What a refresh does to the optimizer's moments: keep them or reset them (step
  # counts, and so the schedule, are kept).
  c.refresh_state = "keep"
  return c
