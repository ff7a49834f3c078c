"""Embedding bag: sum of each bag's rows (an EmbeddingBag(mode="sum") written as model code),
then a per-feature bias and ReLU, fused into one gather + middle-dim reduction kernel."""
import torch
import torch.nn as nn

NUM = 5000
DIM = 64
BATCH = 32
BAG = 10

CASES = [
    {"name": "32x10x64", "weight": 1.0, "BATCH": 32, "BAG": 10, "DIM": 64},
    {"name": "tail_5x3x19", "weight": 1.0, "BATCH": 5, "BAG": 3, "DIM": 19},
]


class Model(nn.Module):
    def __init__(self, num: int, dim: int):
        super().__init__()
        self.table = nn.Embedding(num, dim)
        self.bias = nn.Parameter(torch.randn(dim) * 0.1)

    def forward(self, bags):
        pooled = self.table(bags).sum(dim=1)
        return torch.relu(pooled + self.bias)


def get_inputs():
    return [torch.randint(0, NUM, (BATCH, BAG))]


def get_init_inputs():
    return [NUM, DIM]
