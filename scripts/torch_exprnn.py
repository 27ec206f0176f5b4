"""expRNN's architecture in PyTorch, the reference of the sequential-image scripts.

Written here as expRNN's code runs it: W = matrix_exp(A − Aᵀ) (A's strict upper
triangle) once a batch, h ← modReLU(h Wᵀ + V x_t) over the steps, the last state's
linear readout; A drawn by expRNN's Cayley init, V ~ kaiming_normal(relu), the modReLU
bias b ~ U(±0.01). `optimizer` is expRNN's RMSprop, A at a tenth of the rate.
PyTorch is not a dependency of lie_unitary: only the throwaway-environment scripts
(`bench_image_vs_torch.py`, `torch_reference_images.py`) import this.
"""

import numpy as np


def exprnn(torch, hidden: int, num_classes: int = 10):
  """A `torch.nn.Module` mapping inputs (T, B, 1) to logits (B, num_classes)."""

  class ExpRNN(torch.nn.Module):
    def __init__(self):
      super().__init__()
      a = torch.zeros(hidden, hidden)
      u = torch.rand(hidden // 2) * (np.pi / 2)  # expRNN's Cayley init of A
      idx = torch.arange(0, 2 * (hidden // 2), 2)
      a[idx, idx + 1] = -torch.sqrt((1 - torch.cos(u)) / (1 + torch.cos(u)))
      self.a = torch.nn.Parameter(a)
      self.v = torch.nn.Linear(1, hidden, bias=False)
      torch.nn.init.kaiming_normal_(self.v.weight, nonlinearity="relu")
      self.b = torch.nn.Parameter(torch.empty(hidden).uniform_(-0.01, 0.01))
      self.readout = torch.nn.Linear(hidden, num_classes)

    def forward(self, x):  # x (T, B, 1)
      skew = self.a.triu(1) - self.a.triu(1).t()
      w = torch.matrix_exp(skew)
      h = x.new_zeros(x.shape[1], hidden)
      # Iterating the tensor unbinds it (one gather in the backward pass), as expRNN's
      # loop does; indexing `x[t]` instead would materialise a (T, B, 1) gradient a step.
      for x_t in x:
        z = h @ w.t() + self.v(x_t)
        h = torch.sign(z) * torch.relu(torch.abs(z) + self.b)
      return self.readout(h)

  return ExpRNN()


def optimizer(torch, model, learning_rate: float = 1e-3):
  """RMSprop at `learning_rate`, A at a tenth of it (expRNN's lr_orth)."""
  rest = [p for n, p in model.named_parameters() if n != "a"]
  return torch.optim.RMSprop([{"params": rest, "lr": learning_rate},
                              {"params": [model.a], "lr": learning_rate / 10}])
