"""A near-empty problem: what the harness costs when the kernel costs nothing."""
import torch
import torch.nn as nn

N = 16


class Model(nn.Module):
    def forward(self, x):
        return x + 1.0


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
