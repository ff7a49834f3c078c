"""Dense matrix product of two fp32 matrices: (M, K) @ (K, N) -> (M, N)."""
import torch
import torch.nn as nn

M = 512
K = 512
N = 512

TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

CASES = [
    {"name": "512x512x512", "weight": 2.0, "M": 512, "K": 512, "N": 512},
    {"name": "tall_2048x128x256", "weight": 1.0, "M": 2048, "K": 128, "N": 256},
    {"name": "tail_333x511x257", "weight": 1.0, "M": 333, "K": 511, "N": 257},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
