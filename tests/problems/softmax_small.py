"""examples/softmax's model (row softmax over the last dim of a 2-D fp32 tensor) at 8-16x fewer
elements per case: for tests whose subject is the harness's handling of a candidate (the attack
corpus, containment), not the example's sizes. An evaluation of it costs a third of the
example's (inputs, reference outputs and comparisons of 256 KB, not 4 MB), with the same cases'
shape: a weighted main case, a long-row case and an odd-sized tail, plus the held-out case the
harness derives."""
import torch
import torch.nn as nn

BATCH = 64
DIM = 1024

CASES = [
    {"name": "64x1024", "weight": 2.0, "BATCH": 64, "DIM": 1024},
    {"name": "16x4096", "weight": 1.0, "BATCH": 16, "DIM": 4096},
    {"name": "tail_33x999", "weight": 1.0, "BATCH": 33, "DIM": 999},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


def get_inputs():
    # Scaled so that rows have a real spread of logits (max - min around 25).
    return [4.0 * torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
