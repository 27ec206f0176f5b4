"""Tests of the fused Pallas recurrence kernels: maths in Pallas' interpret mode on CPU,
and their lowering through Pallas' Triton backend for CUDA (what a GPU compiles).

References: autodiff of plain `lax.scan` loops written here (forward values and all
cotangents, float64), including shapes that need padding (a batch that is not a
multiple of the block, a state that is not a power of two) and inactive modReLU units.
`SequenceModel(kernel='pallas')` must give the scan kernels' outputs and gradients.
"""

import contextlib
import math

import flax.linen as nn
import jax
from jax import export
import jax.numpy as jnp
import numpy as np
import pytest

from lie_unitary import nn as lnn
from lie_unitary.experiments import runner
from lie_unitary.experiments.rnn import config as rnn_config
from lie_unitary.experiments.rnn import experiment
from lie_unitary.experiments.rnn import trainer as training
from lie_unitary.nn import fused_recurrence

import reference_loops

pytestmark = pytest.mark.usefixtures("fast_compiles")

_ACT = {"relu": nn.relu, "tanh": jnp.tanh, "identity": lambda a: a}


def _inputs(L, B, H, seed=0):
  k = jax.random.split(jax.random.key(seed), 4)
  w = jax.random.normal(k[0], (H, H), jnp.float64) / math.sqrt(H) * 1.2
  h0 = jax.random.normal(k[1], (B, H), jnp.float64)
  p = jax.random.normal(k[2], (L, B, H), jnp.float64)
  weights = jax.random.normal(k[3], (L, B, H), jnp.float64)
  return w, h0, p, weights


def _elementwise_reference(activation):
  def run(w, h0, p):
    def body(h, p_t):
      h = _ACT[activation](h @ w + p_t)
      return h, h
    return jax.lax.scan(body, h0, p)[1]
  return run


def _assert_matches(ours_fn, ref_fn, args, weights, names):
  np.testing.assert_allclose(ours_fn(*args), ref_fn(*args), rtol=1e-12, atol=1e-12)
  loss = lambda fn, *a: jnp.sum(jnp.sin(fn(*a)) * weights)
  argnums = tuple(range(len(args)))
  ours = jax.grad(lambda *a: loss(ours_fn, *a), argnums=argnums)(*args)
  ref = jax.grad(lambda *a: loss(ref_fn, *a), argnums=argnums)(*args)
  for name, a, b in zip(names, ours, ref):
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12, err_msg=name)
  return ours


@pytest.mark.parametrize("activation,L,B,H,block", [
    ("relu", 5, 3, 5, None), ("tanh", 6, 20, 6, 16), ("identity", 4, 16, 16, 16),
    ("tanh", 3, 16, 150, 16)])
def test_elementwise_matches_autodiff_of_a_plain_scan(activation, L, B, H, block):
  # (B, H) = (20, 6) with blocks of 16: two programs, both axes padded. H = 150: the
  # state in three chunks of 64 (padded to 192), W read in 64 × 64 tiles.
  with jax.enable_x64(True):
    w, h0, p, weights = _inputs(L, B, H)
    ours_fn = jax.jit(lambda *a: lnn.fused_elementwise_recurrence(
        *a, activation, block_batch=block))
    _assert_matches(ours_fn, _elementwise_reference(activation), (w, h0, p), weights,
                    ("W", "h0", "p"))


@pytest.mark.parametrize("L,n", [(5, 3), (3, 70)])
def test_modrelu_matches_autodiff_of_a_plain_scan(L, n):
  # n = 70: each half of the state in two chunks of 64 (padded to 128).
  with jax.enable_x64(True):
    B = 18
    w, h0, p, weights = _inputs(L, B, 2 * n, seed=1)
    # The first unit is always off; the others straddle the threshold.
    bias = jnp.concatenate([jnp.array([-10.0]), jnp.linspace(-0.2, 0.1, n - 1)])
    ours_fn = jax.jit(lambda *a: lnn.fused_modrelu_recurrence(*a, block_batch=16))
    hs = ours_fn(w, h0, p, bias)
    np.testing.assert_array_equal(hs[:, :, 0], 0.0)
    ours = _assert_matches(ours_fn, reference_loops.modrelu_pairs_scan, (w, h0, p, bias), weights,
                           ("W", "h0", "p", "bias"))
    assert float(ours[3][0]) == 0.0  # an inactive unit's bias gets no gradient


def test_modrelu_state_held_at_zero_passes_no_gradient():
  # A zero state under zero inputs: modReLU's derivative at 0 is 0, as the scan's.
  with jax.enable_x64(True):
    L0, L, B, n = 6, 9, 16, 3
    w, h0, p, weights = _inputs(L, B, 2 * n, seed=2)
    h0, p = jnp.zeros_like(h0), p.at[:L0].set(0.0)
    bias = jnp.array([0.01, 0.3, -0.01])
    ours_fn = jax.jit(lambda *a: lnn.fused_modrelu_recurrence(*a, block_batch=16))
    np.testing.assert_array_equal(ours_fn(w, h0, p, bias)[:L0], 0.0)
    ours = _assert_matches(ours_fn, reference_loops.modrelu_pairs_scan, (w, h0, p, bias), weights,
                           ("W", "h0", "p", "bias"))
    np.testing.assert_array_equal(ours[2][:L0], 0.0)


def test_vmap_over_transitions_matches_each_call():
  # Replicate sweeps vmap the model: the kernel's grid gains an axis.
  with jax.enable_x64(True):
    w, h0, p, _ = _inputs(4, 3, 6)
    bias = jnp.array([0.1, -0.3, 0.2])
    ws = jnp.stack([w, 0.5 * w])
    both = jax.jit(jax.vmap(lambda v: lnn.fused_modrelu_recurrence(v, h0, p, bias)))(ws)
    for i in range(2):
      np.testing.assert_allclose(both[i], reference_loops.modrelu_pairs_scan(ws[i], h0, p, bias),
                                 rtol=1e-12, atol=1e-12)


def test_bad_arguments_raise_value_error():
  w, h0, p = jnp.eye(4), jnp.zeros((2, 4)), jnp.zeros((3, 2, 4))
  with pytest.raises(ValueError, match="expected"):
    lnn.fused_elementwise_recurrence(w, h0[0], p)
  with pytest.raises(ValueError, match="activation"):
    lnn.fused_elementwise_recurrence(w, h0, p, "gelu")
  for block in (8, 24):
    with pytest.raises(ValueError, match="block_batch"):
      lnn.fused_elementwise_recurrence(w, h0, p, block_batch=block)
  with pytest.raises(ValueError, match="bias"):
    lnn.fused_modrelu_recurrence(w, h0, p, jnp.zeros(3))
  if jax.default_backend() == "cpu":
    with pytest.raises(ValueError, match="compile for GPUs"):
      lnn.fused_elementwise_recurrence(w, h0, p, interpret=False)


@pytest.mark.parametrize("cell", [
    lnn.GURNNCell(features=3, activation="modrelu", h0="zeros", param_dtype=jnp.float64),
    lnn.GURNNCell(features=3, activation="tanh", param_dtype=jnp.float64),
    lnn.SimpleRNNCell(features=5, activation="relu", param_dtype=jnp.float64),
], ids=["gurnn_modrelu", "gurnn_tanh_random_h0", "irnn"])
def test_sequence_model_pallas_kernel_matches_scan(cell):
  with jax.enable_x64(True):
    x = jax.random.normal(jax.random.key(2), (4, 6, 2), jnp.float64)
    key = jax.random.key(3)
    scan = lnn.SequenceModel(cell, num_outputs=2, readout="all")
    fused = lnn.SequenceModel(cell, num_outputs=2, readout="all", kernel="pallas")
    params = scan.init(jax.random.key(0), x, key)
    loss = lambda model, v: jnp.sum(jnp.sin(model.apply(v, x, key)))
    np.testing.assert_allclose(jax.jit(fused.apply)(params, x, key),
                               jax.jit(scan.apply)(params, x, key), rtol=1e-12, atol=1e-12)
    g_scan = jax.jit(jax.grad(lambda v: loss(scan, v)))(params)
    g_fused = jax.jit(jax.grad(lambda v: loss(fused, v)))(params)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12),
                 g_fused, g_scan)


def test_sequence_model_rejects_a_bad_or_unusable_kernel():
  x = jnp.zeros((2, 3, 1))
  with pytest.raises(ValueError, match="kernel must be"):
    lnn.SequenceModel(lnn.GURNNCell(features=2), 1, kernel="triton").init(
        jax.random.key(0), x, jax.random.key(1))
  with pytest.raises(ValueError, match="kernel='pallas' needs a cell"):
    lnn.SequenceModel(nn.OptimizedLSTMCell(4), 1, kernel="pallas").init(jax.random.key(0), x)


@pytest.mark.slow
def test_experiment_kernel_field_trains_as_scan_and_keeps_scan_units():
  # `--config.kernel=pallas`: a different unit for the models it concerns only, and a
  # few training updates that give the scan kernels' losses and parameters.
  config = rnn_config.get_config("smoke")
  config.num_replicates, config.batch_size = 1, 4
  scan_spec = experiment.unit_spec(config, "gurnn", config.T[0])
  config.kernel = "pallas"
  experiment.validate_config(config)
  fused_spec = experiment.unit_spec(config, "gurnn", config.T[0])
  assert "kernel" not in scan_spec and fused_spec.kernel == "pallas"
  assert "kernel" not in experiment.unit_spec(config, "lstm", config.T[0])
  assert training.make_model(fused_spec).kernel == "pallas"
  assert training.make_model(scan_spec).kernel == "scan"

  def train(spec):
    exp = training.make_experiment(spec)
    ids = jnp.zeros((1,), jnp.int32)
    state, loss = exp.train_chunk(exp.init(ids), ids, 0, 3)
    return state.params, np.asarray(loss)

  (p_scan, l_scan), (p_fused, l_fused) = train(scan_spec), train(fused_spec)
  np.testing.assert_allclose(l_fused, l_scan, rtol=1e-5)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6),
               p_fused, p_scan)
  config.kernel = "triton"
  with pytest.raises(runner.ConfigError, match="kernel"):
    experiment.validate_config(config)


def _abstract_gpu():
  """From jax 0.11 Pallas asks the mesh which GPU it compiles for: name one (an H100).
  Earlier releases read no such device (and their AbstractDevice takes no platform)."""
  try:
    gpu = jax.sharding.AbstractDevice(device_kind="NVIDIA H100 80GB HBM3", num_cores=132,
                                      platform="gpu")
  except (AttributeError, TypeError):
    return contextlib.nullcontext()
  return jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((), (), abstract_device=gpu))


@pytest.mark.parametrize("activation", ["tanh", "relu", "modrelu"])
def test_kernels_lower_through_the_triton_backend_for_cuda(activation, monkeypatch):
  # Lowered for CUDA from this CPU process (what a GPU would compile, up to PTX): the
  # kernels must meet Pallas' Triton rules (power-of-two tensors, slicing refs, not
  # values; dot shapes) and select Triton, not Mosaic GPU. Forward and reverse kernels,
  # vmapped as replicate sweeps run them, at the copy task's n = 95.
  monkeypatch.setattr(fused_recurrence, "_interpret", lambda interpret: False)
  L, B, n = 6, 20, 95
  w, h0, p = jnp.zeros((2 * n, 2 * n)), jnp.zeros((B, 2 * n)), jnp.zeros((L, B, 2 * n))
  if activation == "modrelu":
    run = lambda w: lnn.fused_modrelu_recurrence(w, h0, p, jnp.zeros(n))
  else:
    run = lambda w: lnn.fused_elementwise_recurrence(w, h0, p, activation)
  grads = jax.vmap(jax.grad(lambda w: jnp.sum(run(w))))
  with _abstract_gpu():
    exported = export.export(
        jax.jit(grads), platforms=["cuda"],
        disabled_checks=[export.DisabledSafetyCheck.custom_call(name)
                         for name in ("__gpu$xla.gpu.triton", "triton_kernel_call")],
    )(jnp.stack([w, w]))
  text = exported.mlir_module()
  assert text.count("xla.gpu.triton") + text.count("triton_kernel_call") == 2
