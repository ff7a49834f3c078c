"""LayerNorm whose width Model.__init__ reads from the module (`N = 1024`), with no CASES: every
size is even, so the harness adds a held-out case with N = 1023, which a candidate that copies
`N = 1024` gets wrong (its weights are drawn 1024 wide). The synthesizer must refuse, naming N."""
import torch
import torch.nn as nn

BATCH = 32
N = 1024


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(N)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(N))
            self.norm.bias.add_(0.1 * torch.randn(N))

    def forward(self, x):
        return self.norm(x)


def get_inputs():
    return [torch.randn(BATCH, N)]


def get_init_inputs():
    return []
