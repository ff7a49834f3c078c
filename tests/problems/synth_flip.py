"""A flip: not covered by the synthesizer (it stays in torch)."""
import torch
import torch.nn as nn

batch_size = 16
dim = 100


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.flip(x, dims=[1])


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
