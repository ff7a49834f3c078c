"""fmod, remainder and floor division by a tensor, in the one-step double kernel
(cpp_prelude.py's ke_fmod_fast) and the exact 13-step one it falls back to: the first case
plants quotients far above 2^28 (1e30 / 0.7, -3e30 / 1e-3), so
the kernel runs again exactly; the tail case has none, so the fast pass alone answers. Both
carry the edges: a zero divisor, NaN, inf over a finite, a finite over inf, signed zeros."""
import torch
import torch.nn as nn

N = 4096

CASES = [
    {"name": "far_4096", "weight": 1.0},
    {"name": "tail_999", "weight": 1.0, "N": 999},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return torch.fmod(a, b), torch.remainder(a, b), torch.floor_divide(a, b)


def get_inputs():
    a = torch.randn(N) * 100
    b = torch.randn(N)
    a[:8] = torch.tensor([1.0, -7.5, float("nan"), float("inf"), 3.0, -0.0, 0.0, 2.5])
    b[:8] = torch.tensor([0.1, 0.0, 1.0, 2.0, float("inf"), 1.5, -2.0, float("nan")])
    if N == 4096:
        a[8:12] = torch.tensor([1e30, -3e30, 5e10, 1e20])
        b[8:12] = torch.tensor([0.7, 1e-3, 1e-7, -3.3])
    return [a, b]


def get_init_inputs():
    return []
