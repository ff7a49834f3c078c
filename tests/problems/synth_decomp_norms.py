"""Normalisations in inference: batch norm with running statistics (eval mode), group norm and
instance norm (batch statistics over a batch of one per sample), each with its affine weights. The batch stays 4: torch's instance norm repeats its
weights once per sample, a size the trace bakes in (a batch that varies is not covered)."""
import torch
import torch.nn as nn

BATCH = 4
CHANNELS = 16
SIZE = 12

CASES = [
    {"name": "4x16x12", "weight": 1.0, "BATCH": 4, "SIZE": 12},
    {"name": "tail_4x16x9", "weight": 1.0, "BATCH": 4, "SIZE": 9},
]


class Model(nn.Module):
    def __init__(self, channels: int, groups: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 2.0)
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.2, 0.2)
        self.bn.eval()
        self.gn = nn.GroupNorm(groups, channels)
        self.inorm = nn.InstanceNorm2d(channels, affine=True)

    def forward(self, x):
        return self.bn(x), self.gn(x), self.inorm(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE) * 2.0 + 0.5]


def get_init_inputs():
    return [CHANNELS, 4]
