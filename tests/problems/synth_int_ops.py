"""Integer transforms fused with float work: hashing with wrap-around, Python-rounding
remainder and floor division on negative values, shifts, bit ops, int32 arithmetic and
bucketize (right=True), all on signed inputs that cross zero."""
import torch
import torch.nn as nn

N = 4096

CASES = [
    {"name": "4096", "weight": 1.0, "N": 4096},
    {"name": "tail_1001", "weight": 1.0, "N": 1001},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("edges", torch.tensor([-2.0, -0.5, 0.0, 0.25, 1.0, 3.0]))

    def forward(self, x, ids):
        bucket = torch.bucketize(x, self.edges, right=True)
        h = (ids ^ (ids >> 13)) * -7046029254386353131          # wraps around int64
        h = (h + (ids << 5)) % 1000003 - torch.floor_divide(ids, -37)
        small = (ids.to(torch.int32) * 65537) % 97                # int32 wrap-around
        mask = (ids & 3) == 1
        y = torch.where(mask, x * 2.0, -x) + (bucket * 3).float() / 7
        return h + bucket, small, y


def get_inputs():
    x = torch.randn(N) * 2
    x[:6] = torch.tensor([-2.0, -0.5, 0.0, 0.25, 1.0, 3.0])     # exactly on the edges
    return [x, torch.randint(-2**40, 2**40, (N,))]


def get_init_inputs():
    return []
