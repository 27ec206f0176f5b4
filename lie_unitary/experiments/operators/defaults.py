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
  # The experiment's name (recorded in the launch file; not used by the computation).
  c.variant = ""
  # 'complex': U(n) targets, complex x and noise. 'real': SO(n) targets, real x and noise.
  c.field = "complex"
  # Matrix sizes n.
  c.n_values = (6,)
  # What to fit: parametrizations of the field (`lie_unitary.PARAMETRIZATIONS`) and the
  # baselines true (the target), rand (another draw), lstsq (unconstrained least squares).
  c.approaches = ("true", "rand", "lstsq", "projection", "arjovsky", "lie_algebra")
  # Target generators, cycled over replicates (replicate r uses generators[r % len]):
  # qr, haar, lie, composition (complex); haar, lie (real).
  c.generators = ("lie", "qr", "composition")
  # Independent replicates (target, data, init) per setting, as one vmapped program.
  c.num_replicates = 18
  # Epochs per n as (n, epochs) pairs; (0, e) is the default for every n not listed.
  # Each epoch visits the num_train pairs in a fresh order.
  c.num_epochs = ((0, 1),)
  # Pairs per step.
  c.batch_size = 20
  # 'sgd' (as the paper ran it) or 'rmsprop' (no momentum).
  c.optimizer = "sgd"
  # Step size (each unit's: learning_rate / d for d in lr_divisors).
  c.learning_rate = 1e-3
  # RMSProp's decay of the mean square.
  c.rmsprop_decay = 0.9
  # 'complex64' (float32 parameters) or 'complex128' (float64; the unit runs with x64
  # enabled). For field='real' the matching real dtype.
  c.dtype = "complex64"
  # Root seed: replicate r at size n uses fold_in(fold_in(key(seed), n), r), the same
  # target and data for every approach.
  c.seed = 0
  # Training pairs per replicate (the paper: 10⁶ = 50,000 batches of 20).
  c.num_train = 1_000_000
  # Validation pairs (the whole set is evaluated at the end).
  c.num_val = 100_000
  # Test pairs.
  c.num_test = 100_000
  # Steps between validation points (the paper: 250); divides num_train // batch_size.
  c.val_every = 250
  # Validation pairs of the curve during training (the first ones of the set).
  c.val_subsample = 10_000
  # Standard deviation of each real component of the noise ε.
  c.noise_std = 0.01
  # Std of the target λ of the 'lie' generator (1 in §3; 0.01 in appendix B).
  c.lie_target_std = 1.0
  # Appendix B: c of the change of basis M ~ U(-c, c) (n² × n²); 0 = standard basis.
  # c > 0 needs approaches lie_algebra, lie_zero_init or lie_rebased (and baselines).
  c.basis_scales = (0.0,)
  # Appendix B: one unit per learning rate learning_rate / d.
  c.lr_divisors = (1.0,)
  # 'constant', or 'cosine': the rate decays to 0 over the run.
  c.lr_schedule = "constant"
  # Approaches that refresh their chart (lie_recentred, lie_rebased, ...): before every
  # step s with s % refresh_every == 0, s = 0 included; 0 = never.
  c.refresh_every = 100
  # What a refresh does to the optimizer's moments: keep them or reset them (step
  # counts, and so the schedule, are kept).
  c.refresh_state = "keep"
  return c
