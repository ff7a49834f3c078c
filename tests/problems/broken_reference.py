"""A reference whose forward raises: every executor must report the same problem error."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        raise ValueError("the reference is broken")


def get_inputs():
    return [torch.randn(4, 4)]


def get_init_inputs():
    return []
