"""Golden metrics of operator learning: the numbers after 1 and 50 steps, pinned.

Every approach (complex SGD with every baseline, real RMSProp, an appendix-B change of
basis) is trained for 50 steps at smoke size through the family's public entry point,
and a few metrics are compared with the values the training loop gave when these
tests were written.

If one of these fails, the numbers a training run produces have changed. That is
allowed only on purpose: say in the commit which change moved them and why, and
regenerate the values (`python tests/golden_operators_test.py` prints them). The pins
hold on any CPU host and jax release to tolerances measured across them
(tests/golden.py), and are skipped on GPU/TPU.
"""


import pytest

from lie_unitary.experiments import workdir as workdir_lib

import golden

# End to end: 50 steps through the runner (marked slow: outside the inner loop).
pytestmark = [pytest.mark.usefixtures("fast_compiles"), pytest.mark.slow]


def _operator_config(kind):
  from lie_unitary.experiments.operators import config as cfg_lib
  c = cfg_lib.get_config("operators_smoke")
  c.n_values = (3,)
  c.num_replicates = 2
  c.num_epochs = ((0, 1),)
  c.num_train, c.batch_size, c.val_every = 1000, 20, 1  # 50 steps, validated after each
  c.num_val, c.num_test, c.val_subsample = 200, 200, 50
  if kind == "complex":
    c.approaches = ("true", "rand", "lstsq", "projection", "arjovsky", "lie_restricted",
                    "lie_algebra")
  elif kind == "real":
    c.field, c.optimizer = "real", "rmsprop"
    c.generators = ("haar", "lie")
    c.approaches = ("true", "projection_orthogonal", "so_algebra")
  elif kind == "basis":
    c.approaches = ("lie_algebra",)
    c.generators = ("lie",)
    c.lie_target_std = 0.01
    c.basis_scales = (5.0,)
    c.lr_divisors = (2.0,)
  return c


def operator_metrics(kind, workdir):
  """{(approach, replicate): (val loss after 1 step, after 50, test loss)}."""
  from lie_unitary.experiments.operators import experiment
  experiment.train_and_evaluate(_operator_config(kind), workdir, printer=lambda *_: None,
                                handle_signals=False)
  out = {}
  for c in workdir_lib.read(workdir, "curves.jsonl"):
    out[(c["approach"], c["replicate"])] = [c["val_loss"][1], c["val_loss"][50]]
  for r in workdir_lib.read(workdir):
    out.setdefault((r["approach"], r["replicate"]), []).append(r["test_loss"])
  return {k: tuple(v) for k, v in out.items()}



# --- The pinned values --------------------------------------------------------

GOLDEN_OPERATORS = {
    'complex': {
        ('arjovsky', 0): (18.737457275390625, 13.105751991271973, 9.870142936706543),
        ('arjovsky', 1): (18.478116989135742, 14.381925582885742, 12.189589500427246),
        ('lie_algebra', 0): (14.235888481140137, 12.532355308532715, 12.48287582397461),
        ('lie_algebra', 1): (11.79029655456543, 9.590010643005371, 8.752459526062012),
        ('lie_restricted', 0): (15.643465042114258, 13.977001190185547, 12.48513126373291),
        ('lie_restricted', 1): (8.913952827453613, 7.644442081451416, 8.159438133239746),
        ('lstsq', 0): (0.000645721738692373,),
        ('lstsq', 1): (0.0006266542477533221,),
        ('projection', 0): (13.30531120300293, 11.625280380249023, 8.50942325592041),
        ('projection', 1): (14.888166427612305, 13.633241653442383, 11.640408515930176),
        ('rand', 0): (6.2032365798950195,),
        ('rand', 1): (8.117448806762695,),
        ('true', 0): (0.0006446343031711876,),
        ('true', 1): (0.0006224934477359056,),
    },
    'real': {
        ('projection_orthogonal', 0): (8.092155456542969, 7.94529390335083, 7.042003631591797),
        ('projection_orthogonal', 1): (9.21915054321289, 9.194856643676758, 7.11147403717041),
        ('so_algebra', 0): (7.548517227172852, 7.519573211669922, 7.585600852966309),
        ('so_algebra', 1): (3.6299397945404053, 3.3785107135772705, 3.4400434494018555),
        ('true', 0): (0.0002799586800392717,),
        ('true', 1): (0.0002610631345305592,),
    },
    'basis': {
        ('lie_algebra', 0): (17.334043502807617, 0.10898057371377945, 0.09332450479269028),
        ('lie_algebra', 1): (11.026276588439941, 0.024936072528362274, 0.02088981494307518),
    },
}


# Relative tolerances (tests/golden.py): per metric (val after 1 step, after 50, test).
# Appendix B's change of basis (M ~ U(±5), n² × n²) is ill-conditioned: it amplifies
# XLA's CPU rounding differences in the later metrics.
RTOL = {"complex": 1e-5, "real": 1e-5, "basis": (1e-5, 5e-4, 5e-4)}


@pytest.mark.parametrize("kind", ["complex", "real", "basis"])
def test_operator_learning_golden(kind, tmp_path):
  golden.require_cpu()
  golden.check(operator_metrics(kind, str(tmp_path)), GOLDEN_OPERATORS[kind], RTOL[kind])


if __name__ == "__main__":  # prints the values to paste above
  golden.print_values("GOLDEN_OPERATORS", operator_metrics, ("complex", "real", "basis"))
