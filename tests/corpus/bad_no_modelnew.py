# problem: problems/softmax_small.py
# expect: static
# reason: ModelNew
"""Defines the wrong class name."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
