import torch
import torch.nn as nn


class Model(nn.Module):
    """
    y = 1e-5 * tanh(x): every output is below 1e-5 in magnitude, far under the float32 atol of
    1e-4, so an all-zeros output passes an elementwise allclose (used by the corpus to check the
    norm gate; KernelBench style, with CASES).
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 1e-5 * torch.tanh(x)


batch_size = 256
dim = 1024

CASES = [
    {"name": "256x1024", "weight": 1.0, "batch_size": 256, "dim": 1024},
    {"name": "tail_33x999", "weight": 1.0, "batch_size": 33, "dim": 999},
]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
