"""Golden metrics: the training loops' numbers after 1 and 50 steps, pinned.

Every approach of operator learning (complex SGD, real RMSProp, a change of basis)
and every RNN model (plus the long-sequence recipes: modReLU with the diagonal-phases
init and its own λ learning rate; learning-rate drops) is trained for 50 steps at
smoke size through the experiments' public entry points, and a few metrics are
compared with the values the training loops gave when these tests were written.

If one of these fails, the numbers a training run produces have changed. That is
allowed only on purpose: say in the commit which change moved them and why, and
regenerate the values (`python tests/golden_test.py` prints them).

The values pin float32 arithmetic as compiled by one jax/jaxlib release: other
releases round differently (1e-6 to 4e-6 between jax 0.8.2 and 0.10.0, and a ReLU
network that takes another path), so with another jax the tests are skipped, naming
the release they were recorded with. Regenerate them when the toolchain moves.
"""

import os
import sys

import numpy as np
import pytest

from lie_unitary.experiments import records

pytestmark = pytest.mark.usefixtures("fast_compiles")

_RTOL = 1e-6
GOLDEN_JAX = "0.10.2"  # the jax and jaxlib release the values below were recorded with


@pytest.fixture
def _recorded_toolchain():
  import jax  # pylint: disable=import-outside-toplevel
  import jaxlib  # pylint: disable=import-outside-toplevel
  if jax.default_backend() != "cpu":
    pytest.skip("golden values are CPU arithmetic")
  if (jax.__version__, jaxlib.__version__) != (GOLDEN_JAX, GOLDEN_JAX):
    pytest.skip(f"golden values recorded with jax/jaxlib {GOLDEN_JAX}; this is "
                f"{jax.__version__}/{jaxlib.__version__} (regenerate: python tests/golden_test.py)")


# --- How the numbers are obtained (the only part a refactor may change) ---------------


def _operator_config(kind):
  from lie_unitary.experiments.operators import config as cfg_lib  # pylint: disable=import-outside-toplevel
  c = cfg_lib.get_config("smoke")
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
  from lie_unitary.experiments.operators import experiment  # pylint: disable=import-outside-toplevel
  experiment.train_and_evaluate(_operator_config(kind), workdir, printer=lambda *_: None,
                                handle_signals=False)
  out = {}
  for c in records.read_records(os.path.join(workdir, "curves.jsonl")):
    out[(c["approach"], c["replicate"])] = [c["val_loss"][1], c["val_loss"][50]]
  for r in records.read_records(os.path.join(workdir, "results.jsonl")):
    out.setdefault((r["approach"], r["replicate"]), []).append(r["test_loss"])
  return {k: tuple(v) for k, v in out.items()}


def _rnn_config(kind):
  from lie_unitary.experiments.rnn import config as rnn_configs  # pylint: disable=import-outside-toplevel
  c = rnn_configs.get_config("smoke")
  c.num_updates, c.val_every = 50, 1
  if kind == "models":
    c.model = ("gurnn", "gurnn_beta", "urnn", "lstm", "irnn", "tanh", "free")
  elif kind == "copy_long":
    long = rnn_configs.get_config("copy_long")
    for field in ("lambda_init", "lambda_optimizer", "h0"):
      c[field] = long[field]
    for field in ("activation", "lambda_learning_rate"):
      c.models.gurnn[field] = long.models.gurnn[field]
    c.model, c.task = ("gurnn",), "memory"
  elif kind == "lr_drops":
    c.model = ("gurnn",)
    c.lambda_optimizer = "rmsprop"
    c.lr_drops, c.lr_drop_factor = (10, 30), 0.5
  return c


def rnn_metrics(kind, workdir):
  """{(model, replicate): (train loss of step 1, val loss after 1 step, after 50, test loss)}."""
  from lie_unitary.experiments import runner  # pylint: disable=import-outside-toplevel
  runner.train_and_evaluate("rnn", _rnn_config(kind), workdir, printer=lambda *_: None,
                            handle_signals=False)
  recs = records.read_records(os.path.join(workdir, "results.jsonl"))
  out = {}
  for r in recs:
    if r["kind"] == "val" and r["step"] in (1, 50):
      out[(r["model"], r["replicate"], r["step"])] = r
  finals = {(r["model"], r["replicate"]): r for r in recs if r["kind"] == "final"}
  return {k: (out[k + (1,)]["train_loss"], out[k + (1,)]["val_loss"],
              out[k + (50,)]["val_loss"], f["test_loss"]) for k, f in finals.items()}


# --- The pinned values ----------------------------------------------------------------

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

GOLDEN_RNN = {
    'models': {
        ('free', 0): (9.0578031539917, 1.0219142436981201, 0.18463638424873352, 0.14952941238880157),
        ('free', 1): (28.173282623291016, 1.5768415927886963, 0.13489779829978943, 0.14747869968414307),
        ('gurnn', 0): (2.190523862838745, 1.2903059720993042, 0.1905653029680252, 0.1835019886493683),
        ('gurnn', 1): (1.1341992616653442, 0.9137762188911438, 0.16200633347034454, 0.15775316953659058),
        ('gurnn_beta', 0): (6.203150749206543, 0.8918759226799011, 0.19358880817890167, 0.19866932928562164),
        ('gurnn_beta', 1): (2.6504063606262207, 0.6753002405166626, 0.1356799155473709, 0.15164348483085632),
        ('irnn', 0): (1.0730454921722412, 0.7568976283073425, 0.1611478179693222, 0.14693649113178253),
        ('irnn', 1): (1.0168370008468628, 0.8372946977615356, 0.14659295976161957, 0.14929282665252686),
        ('lstm', 0): (1.0728100538253784, 0.8922181129455566, 0.15828196704387665, 0.15541711449623108),
        ('lstm', 1): (1.1045459508895874, 0.9457799196243286, 0.16241291165351868, 0.15036743879318237),
        ('tanh', 0): (0.7208607792854309, 0.565062403678894, 0.19452261924743652, 0.17031894624233246),
        ('tanh', 1): (1.2054047584533691, 0.9445381164550781, 0.17721593379974365, 0.1563108265399933),
        ('urnn', 0): (2.2236831188201904, 0.5431572198867798, 0.14975619316101074, 0.15095412731170654),
        ('urnn', 1): (0.3533734977245331, 0.3435147702693939, 0.15223737061023712, 0.12766709923744202),
    },
    'copy_long': {
        ('gurnn', 0): (2.7747063636779785, 2.574819803237915, 0.9487997889518738, 0.9451956748962402),
        ('gurnn', 1): (2.7244412899017334, 2.6986083984375, 1.400253176689148, 1.3985477685928345),
    },
    'lr_drops': {
        ('gurnn', 0): (2.190523862838745, 1.2894080877304077, 0.20621584355831146, 0.2105017900466919),
        ('gurnn', 1): (1.1341992616653442, 0.9134864211082458, 0.19062082469463348, 0.1596311777830124),
    },
}


def _check(got, expected):
  assert sorted(got) == sorted(expected), (sorted(got), sorted(expected))
  for k in expected:
    np.testing.assert_allclose(got[k], expected[k], rtol=_RTOL, err_msg=str(k))


@pytest.fixture(scope="module")
def rnn_models_run(tmp_path_factory):
  """The every-model RNN run: pinned below, and checked for sanity on any toolchain."""
  workdir = str(tmp_path_factory.mktemp("rnn_models"))
  return rnn_metrics("models", workdir), workdir


@pytest.mark.usefixtures("_recorded_toolchain")
@pytest.mark.parametrize("kind", ["complex", "real", "basis"])
def test_operator_learning_golden(kind, tmp_path):
  _check(operator_metrics(kind, str(tmp_path)), GOLDEN_OPERATORS[kind])


@pytest.mark.usefixtures("_recorded_toolchain")
def test_rnn_golden_every_model(rnn_models_run):
  _check(rnn_models_run[0], GOLDEN_RNN["models"])


@pytest.mark.usefixtures("_recorded_toolchain")
@pytest.mark.parametrize("kind", ["copy_long", "lr_drops"])
def test_rnn_golden(kind, tmp_path):
  _check(rnn_metrics(kind, str(tmp_path)), GOLDEN_RNN[kind])


def test_every_rnn_model_trains_on_any_toolchain(rnn_models_run):
  # Not pinned: every model's validation loss is finite and falls over 50 steps, and its
  # records carry the shared vocabulary (this also runs where the pins are skipped).
  _, workdir = rnn_models_run
  recs = records.read_records(os.path.join(workdir, "results.jsonl"))
  models = ("gurnn", "gurnn_beta", "urnn", "lstm", "irnn", "tanh", "free")
  assert {r["model"] for r in recs} == set(models)
  for model in models:
    for replicate in (0, 1):
      val = {r["step"]: r["val_loss"] for r in recs if r["model"] == model
             and r["replicate"] == replicate and r["kind"] == "val"}
      assert sorted(val) == list(range(51)) and all(np.isfinite(list(val.values())))
      assert val[50] < val[0], (model, val[0], val[50])
      final, = [r for r in recs if r["model"] == model and r["replicate"] == replicate
                and r["kind"] == "final"]
      assert final["step"] == 50 and np.isfinite(final["test_loss"])
      assert final["unit"].startswith(final["unit_name"]) and "update" not in final


if __name__ == "__main__":  # prints the values to paste above
  import tempfile  # pylint: disable=import-outside-toplevel

  import jax  # pylint: disable=import-outside-toplevel
  jax.config.update("jax_disable_most_optimizations", True)
  with jax.default_matmul_precision("highest"):
    for name, fn, kinds in (("GOLDEN_OPERATORS", operator_metrics, ("complex", "real", "basis")),
                            ("GOLDEN_RNN", rnn_metrics, ("models", "copy_long", "lr_drops"))):
      print(f"{name} = {{")
      for kind in kinds:
        got = fn(kind, tempfile.mkdtemp())
        print(f"    {kind!r}: {{")
        for k in sorted(got):
          print(f"        {k!r}: ({''.join(repr(float(v)) + ', ' for v in got[k])[:-1]}),")
        print("    },")
      print("}")
    sys.stdout.flush()
