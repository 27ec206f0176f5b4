"""The ceiling benchmark's arithmetic: FLOPs per example, state sizes, and that its chain
computes the products it counts, the rnn benchmark's `matmuls` row too (no timings are
asserted)."""

import types

import numpy as np

from benchmarks import ceiling
from benchmarks import rnn


def test_flops_per_example_counts_the_recurrent_products():
  # The guRNN at 16K: 116 complex units as H = 232 reals, 784 steps: 2·232² a product.
  assert ceiling.flops_per_example(1, 232, 784, train=False) == 2 * 232 * 232 * 784
  assert ceiling.flops_per_example(1, 232, 784, train=True) == 3 * 2 * 232 * 232 * 784
  # The LSTM's four gates: (B, H) @ (H, 4H).
  assert ceiling.flops_per_example(4, 62, 784, train=True) == 3 * 2 * 4 * 62 * 62 * 784
  spec = lambda model, size: types.SimpleNamespace(model=model, hidden_size=size)
  assert ceiling.state_size(spec("gurnn", 116)) == 232
  assert ceiling.state_size(spec("orthogonal", 170)) == 170


def test_chain_counts_examples_and_computes_its_products():
  # W̄ of the training chain against the same sums written out in numpy.
  H, G, B, L = 4, 2, 3, 5
  assert rnn.chain_variant(H, G, B, L, 1, train=True)() == B
  w, p, g = (np.asarray(a, np.float64) for a in rnn.chain_inputs(H, G, B, L))
  hs, h = [], np.zeros((B, H))
  for t in range(L):
    h = (h @ w).reshape(B, G, H).sum(1) + p[t]
    hs.append(h)
  ds, d = [None] * L, np.zeros((B, H))
  for t in reversed(range(L)):
    d = np.tile(d, (1, G)) @ w.T + g[t]
    ds[t] = d
  expected = sum(hs[t].T @ np.tile(ds[t], (1, G)) for t in range(L))
  got = rnn.chain_program(H, G, 1, train=True)(*rnn.chain_inputs(H, G, B, L))
  np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-6)
