import torch
import torch.nn as nn


class Model(nn.Module):
    """
    A linear layer followed by swish and a scalar division (KernelBench level-2 style:
    one library op, then a pointwise epilogue worth fusing).
    """
    def __init__(self, in_features, out_features, divisor):
        super(Model, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x):
        x = self.linear(x)
        x = x * torch.sigmoid(x)
        x = x / self.divisor
        return x


batch_size = 128
in_features = 256
out_features = 512
divisor = 2.0


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, divisor]
