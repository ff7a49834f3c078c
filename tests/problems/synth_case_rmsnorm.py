"""nn.RMSNorm with perturbed weights, sizes through get_init_inputs; every size is even, so the
harness checks a held-out (31, 255) case."""
import torch
import torch.nn as nn

BATCH = 32
DIM = 256


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-6)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(dim))

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM]
