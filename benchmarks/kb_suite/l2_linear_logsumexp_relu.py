"""Linear layer, log-sum-exp over the output features, then ReLU: (B, IN) -> (B, 1)."""
import math

import torch
import torch.nn as nn

BATCH = 1024
IN_FEATURES = 256
OUT_FEATURES = 512

TOLERANCE = {"atol": 1e-3, "rtol": 1e-3}

CASES = [
    {"name": "1024x256x512", "weight": 2.0, "BATCH": 1024, "IN_FEATURES": 256,
     "OUT_FEATURES": 512},
    {"name": "tail_333x129x1001", "weight": 1.0, "BATCH": 333, "IN_FEATURES": 129,
     "OUT_FEATURES": 1001},
]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        # Shift the bias down by about log(out_features), so that with the per-row input scales
        # of get_inputs() the log-sum-exp is negative for a share of the rows and ReLU matters.
        with torch.no_grad():
            self.linear.bias.sub_(math.log(out_features) + 0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.logsumexp(self.linear(x), dim=1, keepdim=True)
        return torch.relu(h)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES) * (2.0 * torch.rand(BATCH, 1))]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
