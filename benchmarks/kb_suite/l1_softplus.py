"""Element-wise softplus with beta and threshold: y = log(1 + exp(beta * x)) / beta,
and y = x where beta * x exceeds the threshold."""
import torch
import torch.nn as nn
import torch.nn.functional as F

ROWS = 2048
COLS = 1024
BETA = 2.0
THRESHOLD = 10.0

CASES = [
    {"name": "2048x1024", "weight": 2.0, "ROWS": 2048, "COLS": 1024},
    {"name": "tail_999x1023", "weight": 1.0, "ROWS": 999, "COLS": 1023},
]


class Model(nn.Module):
    def __init__(self, beta: float, threshold: float):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(x, beta=self.beta, threshold=self.threshold)


def get_inputs():
    # Scaled so a share of the elements lands past the threshold.
    return [4.0 * torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [BETA, THRESHOLD]
