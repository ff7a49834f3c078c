"""LayerNorm over the last dim with learnable weight and bias (nn.LayerNorm)."""
import torch
import torch.nn as nn

BATCH = 8
SEQ = 256
HIDDEN = 768
EPS = 1e-5

CASES = [
    {"name": "8x256x768", "weight": 2.0, "BATCH": 8, "SEQ": 256, "HIDDEN": 768},
    {"name": "tail_5x131x1031", "weight": 1.0, "BATCH": 5, "SEQ": 131, "HIDDEN": 1031},
]


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)
        # Move the affine parameters off their 1/0 defaults so both must be applied.
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(hidden))
            self.norm.bias.add_(0.1 * torch.randn(hidden))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, SEQ, HIDDEN) * 2.0 + 1.0]


def get_init_inputs():
    return [HIDDEN, EPS]
