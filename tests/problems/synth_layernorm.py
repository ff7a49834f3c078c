"""LayerNorm over the last dim with affine weight and bias (KernelBench level-1 style)."""
import torch
import torch.nn as nn

batch_size = 64
features = 1000


class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.ln = nn.LayerNorm(features)
        with torch.no_grad():
            self.ln.weight.add_(0.1 * torch.randn(features))
            self.ln.bias.add_(0.1 * torch.randn(features))

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features]
