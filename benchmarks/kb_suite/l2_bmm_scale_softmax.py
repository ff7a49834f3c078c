"""Attention scores: softmax(q @ k^T / sqrt(d), dim=-1) for batched (B, L, D) queries and keys."""
import math

import torch
import torch.nn as nn

BATCH = 16
SEQ = 256
HEAD_DIM = 64

TOLERANCE = {"atol": 1e-4, "rtol": 1e-3}

CASES = [
    {"name": "16x256x64", "weight": 2.0, "BATCH": 16, "SEQ": 256, "HEAD_DIM": 64},
    {"name": "4x512x128", "weight": 1.0, "BATCH": 4, "SEQ": 512, "HEAD_DIM": 128},
    {"name": "tail_7x197x72", "weight": 1.0, "BATCH": 7, "SEQ": 197, "HEAD_DIM": 72},
]


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        scores = torch.bmm(q, k.transpose(1, 2)) * self.scale
        return torch.softmax(scores, dim=-1)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HEAD_DIM), torch.randn(BATCH, SEQ, HEAD_DIM)]


def get_init_inputs():
    return [HEAD_DIM]
