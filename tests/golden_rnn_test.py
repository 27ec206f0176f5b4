"""Golden metrics of the RNNs: the numbers after 1 and 50 updates, pinned.

Every model (plus the long-sequence recipes: modReLU with the diagonal-phases init and
its own λ learning rate; learning-rate drops) is trained for 50 updates at smoke size
through the family's public entry point, and the three sequential-image models for two
epochs of a 16-pixel IDX set the test writes, and a few metrics are compared with the
values the training loop gave when these tests were written.

If one of these fails, the numbers a training run produces have changed. That is
allowed only on purpose: say in the commit which change moved them and why, and
regenerate the values (`python tests/golden_rnn_test.py` prints them). The pins hold on
any CPU host and jax release to tolerances measured across them (tests/golden.py), and
are skipped on GPU/TPU.
"""

import math
import os

import numpy as np
import pytest

from lie_unitary.experiments import workdir as workdir_lib

import golden

# End to end: 50 steps through the runner (marked slow: outside the inner loop).
pytestmark = [pytest.mark.usefixtures("fast_compiles"), pytest.mark.slow]


def _rnn_config(kind):
  from lie_unitary.experiments.rnn import config as rnn_configs
  c = rnn_configs.get_config("rnn_smoke")
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


def _image_config(workdir):
  """The three image models on a 16-pixel IDX set the test writes (T = 16), 2 epochs."""
  from lie_unitary.experiments.rnn import config as rnn_configs

  from idx_files import write_image_folder
  c = rnn_configs.get_config("permuted_mnist")
  c.dataset = write_image_folder(os.path.join(workdir, "idx"))
  c.T = (16,)
  c.num_validation, c.eval_batch_size, c.batch_size = 64, 32, 32
  c.num_replicates, c.num_updates, c.val_every = 2, 12, 6
  c.seeds, c.data_parallel = (0,), 0  # one seed (the config runs seeds 0-2, a device each)
  # The settings these values were pinned with (the config now takes PyTorch's RMSProp
  # and readout): the pins follow the loop, not the config's choices.
  c.rmsprop_decay, c.rmsprop_eps_in_sqrt, c.readout_init = 0.9, True, "lecun_normal"
  c.lambda_phase_range = math.pi
  c.lstm_forget_bias, c.models.lstm.clip_norm = 0.0, 0.0
  for m in c.models.values():
    m.hidden_size = 8
  return c


def image_metrics(workdir):
  """{(model, replicate): (train loss of epoch 1, val loss after 1 epoch, after 2, test
  loss after 2)}: the image tasks' loop (batches gathered from each epoch's order)."""
  from lie_unitary.experiments import runner
  runner.train_and_evaluate("rnn", _image_config(workdir), os.path.join(workdir, "w"),
                            printer=lambda *_: None, handle_signals=False)
  recs = workdir_lib.read(os.path.join(workdir, "w"))
  val = {(r["model"], r["replicate"], r["step"]): r for r in recs if r["kind"] == "val"}
  return {k[:2]: (v["train_loss"], v["val_loss"], val[k[:2] + (12,)]["val_loss"],
                  val[k[:2] + (12,)]["test_loss"]) for k, v in val.items() if k[2] == 6}


def rnn_metrics(kind, workdir):
  """{(model, replicate): (train loss of step 1, val loss after 1 step, after 50, test loss)}."""
  from lie_unitary.experiments import runner
  if kind == "images":
    return image_metrics(workdir)
  runner.train_and_evaluate("rnn", _rnn_config(kind), workdir, printer=lambda *_: None,
                            handle_signals=False)
  recs = workdir_lib.read(workdir)
  out = {}
  for r in recs:
    if r["kind"] == "val" and r["step"] in (1, 50):
      out[(r["model"], r["replicate"], r["step"])] = r
  finals = {(r["model"], r["replicate"]): r for r in recs if r["kind"] == "final"}
  return {k: (out[k + (1,)]["train_loss"], out[k + (1,)]["val_loss"],
              out[k + (50,)]["val_loss"], f["test_loss"]) for k, f in finals.items()}


# --- The pinned values --------------------------------------------------------

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
    # copy_long re-pinned when modReLU's reverse pass stopped recomputing the
    # pre-activations (z = h / s from the saved moduli) and formed W̄ as the
    # elementwise cells do (h_0ᵀ δ_1 + one product): the gradients round
    # differently: the pinned values moved by up to 1.1e-6 relative.
    'copy_long': {
        ('gurnn', 0): (2.7747063636779785, 2.5748190879821777, 0.9488008618354797, 0.9451966285705566),
        ('gurnn', 1): (2.7244412899017334, 2.6986067295074463, 1.4002522230148315, 1.3985469341278076),
    },
    'lr_drops': {
        ('gurnn', 0): (2.190523862838745, 1.2894080877304077, 0.20621584355831146, 0.2105017900466919),
        ('gurnn', 1): (1.1341992616653442, 0.9134864211082458, 0.19062082469463348, 0.1596311777830124),
    },
    'images': {
        ('gurnn', 0): (2.1133711338043213, 2.103194236755371, 2.0085275173187256, 2.067901134490967),
        ('gurnn', 1): (2.328645706176758, 2.2703158855438232, 2.2097930908203125, 2.2720656394958496),
        ('lstm', 0): (2.2997570037841797, 2.2985897064208984, 2.2977237701416016, 2.30263614654541),
        ('lstm', 1): (2.2958412170410156, 2.3050785064697266, 2.305145740509033, 2.3167028427124023),
        ('orthogonal', 0): (3.193864583969116, 3.366750717163086, 3.2235164642333984, 3.196104049682617),
        ('orthogonal', 1): (3.0189013481140137, 2.7792410850524902, 2.6834425926208496, 3.0268287658691406),
    },
}


@pytest.fixture(scope="module")
def rnn_models_run(tmp_path_factory):
  """The every-model RNN run: pinned below, and checked for sanity on any toolchain."""
  workdir = str(tmp_path_factory.mktemp("rnn_models"))
  return rnn_metrics("models", workdir), workdir


# Relative tolerance of every pinned metric (measured across hosts and releases:
# tests/golden.py).
RTOL = 2e-4


def test_rnn_golden_every_model(rnn_models_run):
  golden.require_cpu()
  got, pinned = dict(rnn_models_run[0]), dict(GOLDEN_RNN["models"])
  # The free model (an unconstrained 2n×2n recurrence at β = 1.4) is chaotic: on a host
  # without AVX-512 under jax 0.8.0 its replicate 0 matched the pins to 1e-7 at steps 0
  # and 1 and was 15% off after 50 updates, while every other model stayed within 2e-6.
  # Its later metrics pin the host's rounding, not this code: only the first two are
  # pinned (the trajectory is checked by the test below on every toolchain).
  for key in [k for k in pinned if k[0] == "free"]:
    got[key], pinned[key] = got[key][:2], pinned[key][:2]
  golden.check(got, pinned, RTOL)


# The learning-rate drops' replicate 0 amplifies rounding after its drops: on an Intel
# Xeon host (AVX-512) under the tests' XLA flags its validation and test losses after 50
# updates were 1.5e-4 and 3.2e-4 from the pins (its first two metrics 9e-7, the other
# pins ≤ 9e-6), so those two hold to ten times that.
RTOL_AFTER_DROPS = (RTOL, RTOL, 3e-3, 3e-3)


@pytest.mark.parametrize("kind", ["copy_long", "lr_drops", "images"])
def test_rnn_golden(kind, tmp_path):
  golden.require_cpu()
  golden.check(rnn_metrics(kind, str(tmp_path)), GOLDEN_RNN[kind],
               RTOL_AFTER_DROPS if kind == "lr_drops" else RTOL)


def test_every_rnn_model_trains_on_any_toolchain(rnn_models_run):
  # Not pinned: every model's validation loss is finite and falls over 50 steps, and its
  # records carry the shared vocabulary (this also runs where the pins are skipped).
  _, workdir = rnn_models_run
  recs = workdir_lib.read(workdir)
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
  golden.print_values("GOLDEN_RNN", rnn_metrics, ("models", "copy_long", "lr_drops", "images"))
