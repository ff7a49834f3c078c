"""Post-norm residual block tail: y = layer_norm(x + residual) * gamma + beta, then + residual."""
import torch
import torch.nn as nn
import torch.nn.functional as F

BATCH = 16
SEQ = 128
HIDDEN = 1024
EPS = 1e-5

CASES = [
    {"name": "16x128x1024", "weight": 2.0, "BATCH": 16, "SEQ": 128, "HIDDEN": 1024},
    {"name": "tail_5x97x1531", "weight": 1.0, "BATCH": 5, "SEQ": 97, "HIDDEN": 1531},
]


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.gamma = nn.Parameter(1.0 + 0.1 * torch.randn(hidden))
        self.beta = nn.Parameter(0.1 * torch.randn(hidden))
        self.hidden = hidden
        self.eps = eps

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h = F.layer_norm(x + residual, (self.hidden,), self.gamma, self.beta, self.eps)
        return h + residual


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN), torch.randn(BATCH, SEQ, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, EPS]
