import torch
import torch.nn as nn


class Model(nn.Module):
    """
    The difference of two float32 sums of the same products, taken in opposite orders: exactly
    zero in exact arithmetic, so what float32 shows (about 1e-6 per row) is rounding noise. A
    kernel that accumulates in double returns about 1e-15: more accurate than the reference,
    and within any tolerance of it (used by the corpus to check the anti-zeros rule).
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        p = a * b
        return p.sum(dim=-1) - p.flip(-1).sum(dim=-1)


batch_size = 256
dim = 4096

CASES = [
    {"name": "256x4096", "weight": 1.0, "batch_size": 256, "dim": 4096},
    {"name": "tail_77x999", "weight": 1.0, "batch_size": 77, "dim": 999},
]


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
