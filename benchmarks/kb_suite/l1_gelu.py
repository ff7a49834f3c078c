"""Element-wise GELU (exact, erf form) on a 3-D fp32 activation tensor."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
SEQ = 256
HIDDEN = 512

CASES = [
    {"name": "16x256x512", "weight": 2.0, "BATCH": 16, "SEQ": 256, "HIDDEN": 512},
    {"name": "tail_7x129x1001", "weight": 1.0, "BATCH": 7, "SEQ": 129, "HIDDEN": 1001},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return []
