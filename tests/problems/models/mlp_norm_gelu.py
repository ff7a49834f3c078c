"""A two-layer MLP for the tune-model tests: Linear -> RMSNorm + SiLU -> Linear -> tanh-GELU.

    x (BATCH, DIM) -> fc_in -> silu(rmsnorm(.) * weight) -> fc_out -> gelu_tanh(.)

The normalisation and both activations are written inline, the way model code often writes
them, so each is a chain of small eager kernels (pow, mean, add, rsqrt, mul, mul, silu; and
pow, mul, add, mul, tanh, add, mul, mul) that the built-in synthesizer fuses. The two
nn.Linear layers stay eager. `CASES` is the workload: two batch sizes.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 256
DIM = 256
HIDDEN = 512

CASES = [
    {"name": "b256", "weight": 2.0, "BATCH": 256},
    {"name": "b384", "weight": 1.0, "BATCH": 384},
]


class Model(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.fc_in = nn.Linear(dim, hidden)
        self.norm_weight = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.fc_out = nn.Linear(hidden, dim)

    def forward(self, x):
        h = self.fc_in(x)
        h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + 1e-6) * self.norm_weight
        h = F.silu(h)
        y = self.fc_out(h)
        return 0.5 * y * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y ** 3)))


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM, HIDDEN]
