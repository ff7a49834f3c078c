"""Linear layer, sigmoid, then a sum over the output features: (B, IN) -> (B, 1)."""
import torch
import torch.nn as nn

BATCH = 512
IN_FEATURES = 512
OUT_FEATURES = 512

TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

CASES = [
    {"name": "512x512x512", "weight": 2.0, "BATCH": 512, "IN_FEATURES": 512,
     "OUT_FEATURES": 512},
    {"name": "tail_203x301x677", "weight": 1.0, "BATCH": 203, "IN_FEATURES": 301,
     "OUT_FEATURES": 677},
]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.linear(x)).sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
