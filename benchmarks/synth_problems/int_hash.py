"""Integer transform on int64: multiplicative hashing into a prime-sized table.

    y = (x * 2654435761) % 1000003

Inputs are non-negative and below 2**31, so the product stays below 2**63 and never
overflows int64; the result is exact, compared bit for bit. Eager PyTorch runs two kernels
(mul, remainder) with a full-size int64 temporary; a fused kernel does one pass, and can
replace the division by a constant with a multiply-high.
"""
import torch
import torch.nn as nn

N = 524288
MULTIPLIER = 2654435761
MODULUS = 1000003

CASES = [
    {"name": "512K", "weight": 2.0, "N": 524288},
    {"name": "tail_100003", "weight": 1.0, "N": 100003},
]


class Model(nn.Module):
    def __init__(self, multiplier: int, modulus: int):
        super().__init__()
        self.multiplier, self.modulus = multiplier, modulus

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * self.multiplier) % self.modulus


def get_inputs():
    return [torch.randint(0, 2**31 - 1, (N,), dtype=torch.int64)]


def get_init_inputs():
    return [MULTIPLIER, MODULUS]
