"""Linear (no bias), then an extra per-feature bias, tanh-approximate GELU and a constant scale:
y = gelu_tanh(x @ W.T + b) * scale."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 256
IN_FEATURES = 512
OUT_FEATURES = 1024
SCALE = 1.5

TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

CASES = [
    {"name": "256x512x1024", "weight": 2.0, "BATCH": 256, "IN_FEATURES": 512,
     "OUT_FEATURES": 1024},
    {"name": "tail_97x383x769", "weight": 1.0, "BATCH": 97, "IN_FEATURES": 383,
     "OUT_FEATURES": 769},
]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(0.1 * torch.randn(out_features))
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x) + self.bias
        return F.gelu(h, approximate="tanh") * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALE]
