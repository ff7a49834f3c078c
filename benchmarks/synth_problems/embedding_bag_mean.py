"""Embedding lookup with mean pooling over a fixed-size bag (an EmbeddingBag in model code).

    y[b, :] = mean over j of table[indices[b, j], :]        indices: (BATCH, BAG) int64

Written as model code usually writes it, `embedding(indices).mean(dim=1)`: eager PyTorch
runs two kernels (`embedding` gathers a (BATCH, BAG, DIM) temporary, then `mean.dim`
reduces it); a fused kernel accumulates each bag's rows straight from the table.
"""
import torch
import torch.nn as nn

NUM_EMBEDDINGS = 50000
DIM = 128
BATCH = 512
BAG = 20

CASES = [
    {"name": "512x20x128", "weight": 2.0, "BATCH": 512, "BAG": 20, "DIM": 128},
    {"name": "tail_77x13x67", "weight": 1.0, "BATCH": 77, "BAG": 13, "DIM": 67},
]


class Model(nn.Module):
    def __init__(self, num_embeddings: int, dim: int):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings, dim)

    def forward(self, indices: torch.Tensor) -> torch.Tensor:
        return self.embedding(indices).mean(dim=1)


def get_inputs():
    return [torch.randint(0, NUM_EMBEDDINGS, (BATCH, BAG), dtype=torch.int64)]


def get_init_inputs():
    return [NUM_EMBEDDINGS, DIM]
