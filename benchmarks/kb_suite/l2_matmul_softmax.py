"""Matrix product with a fixed weight followed by a row softmax: y = softmax(x @ W, dim=-1)."""
import math

import torch
import torch.nn as nn

BATCH = 512
IN_FEATURES = 256
CLASSES = 1024

TOLERANCE = {"atol": 1e-4, "rtol": 1e-3}

CASES = [
    {"name": "512x256x1024", "weight": 2.0, "BATCH": 512, "IN_FEATURES": 256, "CLASSES": 1024},
    {"name": "tail_131x201x999", "weight": 1.0, "BATCH": 131, "IN_FEATURES": 201,
     "CLASSES": 999},
]


class Model(nn.Module):
    def __init__(self, in_features: int, classes: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, classes) / math.sqrt(in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.matmul(x, self.weight), dim=-1)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, CLASSES]
