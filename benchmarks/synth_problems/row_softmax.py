"""Row softmax over the last dim of a 2-D fp32 tensor: y = softmax(x, dim=-1).

Eager PyTorch runs one fused, vectorised kernel (`_softmax`), so a synthesized kernel can win
only on the cost of `exp` and the number of passes over a row, not on fusion. Same `Model`
signature as `examples/softmax`, so that example's hand-written candidate works here too.
"""
import torch
import torch.nn as nn

BATCH = 512
DIM = 2048

CASES = [
    {"name": "512x2048", "weight": 2.0, "BATCH": 512, "DIM": 2048},
    {"name": "tail_131x999", "weight": 1.0, "BATCH": 131, "DIM": 999},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    # Rows with a real spread of logits (max - min around 25).
    return [4.0 * torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
