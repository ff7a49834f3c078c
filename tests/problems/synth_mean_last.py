"""Mean and variance over the last dim (two outputs, reductions only)."""
import torch
import torch.nn as nn

batch_size = 96
dim = 777


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.mean(dim=-1), torch.var(x, dim=-1, keepdim=True)


def get_inputs():
    return [torch.randn(batch_size, dim) + 2.0]


def get_init_inputs():
    return []
