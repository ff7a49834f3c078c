# problem: problems/softmax_small.py
# expect: integrity
# reason: no custom kernel
"""A pure-torch reimplementation of softmax presented as an optimisation: no custom kernel at all."""
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e * e.sum(dim=-1, keepdim=True).reciprocal()
