"""PReLU with one slope per channel on (B, C, H, W), sizes passed through get_init_inputs as
they should be. The decomposition views the (C,) weight as the literal `[1, 16, 1, 1]`, kept
in torch; the held-out case has C = 15."""
import torch
import torch.nn as nn

BATCH = 4
CHANNELS = 16
HEIGHT = 12
WIDTH = 20


class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.act = nn.PReLU(channels)
        with torch.no_grad():
            self.act.weight.add_(0.1 * torch.randn(channels))

    def forward(self, x):
        return self.act(x) * 2.0


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS]
