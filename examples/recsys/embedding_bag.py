"""Embedding lookup with sum pooling over a fixed-size bag, one sparse feature's table.

    y[b, :] = sum over j of table[indices[b, j], :]        indices: (BATCH, BAG) int64

Written as model code usually writes it, `embedding(indices).sum(dim=1)`: eager PyTorch runs
two kernels (`embedding` gathers a (BATCH, BAG, DIM) temporary, then `sum.dim_IntList`
reduces it); a fused kernel accumulates each bag's rows straight from the table.
"""
import torch
import torch.nn as nn

NUM_EMBEDDINGS = 20000
DIM = 64
BATCH = 2048
BAG = 20

CASES = [
    {"name": "2048x20x64", "weight": 2.0, "BATCH": 2048, "BAG": 20},
    {"name": "512x20x64", "weight": 1.0, "BATCH": 512, "BAG": 20},
    {"name": "tail_333x20x64", "weight": 1.0, "BATCH": 333, "BAG": 20},
]


class Model(nn.Module):
    def __init__(self, num_embeddings: int, dim: int):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, dim)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return self.embedding(indices).sum(dim=1)


def get_inputs():
    return [torch.randint(0, NUM_EMBEDDINGS, (BATCH, BAG), dtype=torch.int64)]


def get_init_inputs():
    return [NUM_EMBEDDINGS, DIM]
