"""Integer inputs of the new element-wise ops (synthesizer coverage).

round / trunc / floor / ceil keep int64 values; fmod by a constant truncates like C (-7 fmod 3
= -1, the dividend's sign); isnan / isinf of integers are False; sin and atan2 of int32 are float32
(torch promotes); clamp with an int scalar keeps int64.
"""
import torch
import torch.nn as nn

ROWS = 8
COLS = 64


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, k, small):
        return (torch.round(k), torch.trunc(k), torch.floor(k), torch.ceil(k), torch.fmod(k, 3),
                torch.fmod(k, -4), torch.isnan(k), torch.isinf(k), torch.sin(small),
                torch.atan2(small, small + 1), torch.clamp_min(k, -5), torch.clamp_max(k, 7))


def get_inputs():
    k = torch.randint(-100, 100, (ROWS, COLS))
    k[0, :8] = torch.tensor([-7, 7, -6, 0, -1, 2**40, -2**40, 3])
    small = torch.randint(-1000, 1000, (ROWS, COLS), dtype=torch.int32)
    small[0, :4] = torch.tensor([0, -1, 99991, -99991])
    return [k, small]


def get_init_inputs():
    return []
