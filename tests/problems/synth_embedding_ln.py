"""Token embedding lookup, RMS-normalised and scaled per feature: the lookup is fused into a
row kernel (each row reads its table row by index)."""
import torch
import torch.nn as nn

VOCAB = 1000
DIM = 96
BATCH = 16
SEQ = 24

CASES = [
    {"name": "16x24x96", "weight": 1.0, "BATCH": 16, "SEQ": 24, "DIM": 96},
    {"name": "tail_3x7x33", "weight": 1.0, "BATCH": 3, "SEQ": 7, "DIM": 33},
]


class Model(nn.Module):
    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.gain = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, ids):
        e = self.embed(ids)
        rms = torch.rsqrt(e.pow(2).mean(dim=-1, keepdim=True) + 1e-6)
        return e * rms * self.gain


def get_inputs():
    return [torch.randint(0, VOCAB, (BATCH, SEQ))]


def get_init_inputs():
    return [VOCAB, DIM]
