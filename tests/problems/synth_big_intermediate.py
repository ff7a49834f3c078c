"""An outer product with a 4 GiB intermediate: (32768, 1) * (1, 32768) float32, shifted,
ReLU'd and summed over each row. The inputs are 256 KiB in all; a real forward allocates the
(32768, 32768) product (and eager PyTorch a second one for the ReLU). The synthesizer's capture
must trace it without running it (tests/test_synth_capture.py measures its peak RSS)."""
import torch
import torch.nn as nn

ROWS = 32768
COLS = 32768


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.relu(x * y - 0.5).sum(dim=-1)


def get_inputs():
    return [torch.randn(ROWS, 1), torch.randn(1, COLS)]


def get_init_inputs():
    return []
