# problem: problems/softmax_small.py
# expect: static
# reason: syntax error
"""Does not parse."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x)
        return x
