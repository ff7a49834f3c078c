import torch
import torch.nn as nn


class Model(nn.Module):
    """
    Applies a ReLU activation elementwise (written here in KernelBench level-1 style).
    """
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """
        Args:
            x (torch.Tensor): any shape.
        Returns:
            torch.Tensor: relu(x), same shape.
        """
        return torch.relu(x)


batch_size = 16
dim = 16384


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []  # no special initialisation
