"""Factorisation-machine second-order interaction (NFM's Bi-Interaction pooling).

    x: (BATCH, FIELDS, DIM) fp32, one embedding vector per sparse field
    y[b, d] = 0.5 * ((sum_f x[b, f, d])**2 - sum_f x[b, f, d]**2)        y: (BATCH, DIM)

Summed over d this is the FM pairwise term sum over f < g of <x_f, x_g>; kept as a (BATCH,
DIM) vector it feeds the top MLP (as in NFM / DeepFM-style models). Written the way model
code writes it, eager PyTorch runs six kernels (sum, pow, mul, sum, sub, mul) with a
(BATCH, FIELDS, DIM) temporary; a fused kernel reads each sample's (FIELDS, DIM) block once,
walking the field dim with a stride of DIM.
"""
import torch
import torch.nn as nn

BATCH = 2048
FIELDS = 17
DIM = 64

CASES = [
    {"name": "2048x17x64", "weight": 2.0, "BATCH": 2048, "FIELDS": 17, "DIM": 64},
    {"name": "512x17x64", "weight": 1.0, "BATCH": 512, "FIELDS": 17, "DIM": 64},
    {"name": "tail_333x17x64", "weight": 1.0, "BATCH": 333, "FIELDS": 17, "DIM": 64},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        square_of_sum = x.sum(dim=1) ** 2
        sum_of_square = (x * x).sum(dim=1)
        return 0.5 * (square_of_sum - sum_of_square)


def get_inputs():
    # Embedding-scale values (pooled bags of a small-init table).
    return [torch.randn(BATCH, FIELDS, DIM) * 0.1]


def get_init_inputs():
    return []
