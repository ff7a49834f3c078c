import torch
import torch.nn as nn


class Model(nn.Module):
    """
    y = x * 3.0 + 0.5, elementwise: a cheap pointwise problem for the search tests
    (KernelBench format, with CASES; the second case has an odd tail). Both cases stay under
    PyTorch's parallel grain size (32768 elements), so eager runs on one thread like the
    candidate: on a loaded machine a two-thread eager op waits for a descheduled thread and
    its time jumps several-fold, which would make speedups measured at different moments
    incomparable.
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 3.0 + 0.5


batch_size = 32
dim = 1024

CASES = [
    {"name": "32x1000", "weight": 1.0, "batch_size": 32, "dim": 1000},
    {"name": "tail_29x999", "weight": 1.0, "batch_size": 29, "dim": 999},
]


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
