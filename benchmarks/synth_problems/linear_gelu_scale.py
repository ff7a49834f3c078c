"""Linear layer with a fused pointwise epilogue: y = gelu(x @ W.T + b) * scale.

The matmul stays a BLAS call in any sensible kernel; what can be won is the epilogue. Eager
PyTorch runs three kernels (`addmm` with the bias, `gelu`, `mul`), the last two full passes
over the (BATCH, OUT) output; a fused version runs the matmul (`mm`) and then one pass that
adds the bias, applies GELU and scales.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 128
IN_FEATURES = 512
OUT_FEATURES = 512
SCALE = 0.7

CASES = [
    {"name": "128x512x512", "weight": 2.0, "BATCH": 128, "IN_FEATURES": 512,
     "OUT_FEATURES": 512},
    {"name": "tail_33x257x383", "weight": 1.0, "BATCH": 33, "IN_FEATURES": 257,
     "OUT_FEATURES": 383},
]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x)) * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, SCALE]
