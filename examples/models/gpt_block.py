"""A small GPT-style decoder: two pre-norm transformer blocks and a final LayerNorm, in fp32.

    x (BATCH, SEQ, DIM) -> [x = x + attn(ln_1(x)); x = x + mlp(ln_2(x))] x LAYERS -> ln_f(x)

Each block is written the way GPT-2-style code usually is: causal self-attention in the forward
(q/k/v from separate nn.Linear projections, scores = q @ k^T * scale, future positions masked
with a registered lower-triangular buffer, softmax, @ v, an output projection) and an MLP whose
tanh-approximated GELU is written inline. Nothing here is shaped for any optimiser: it is an
ordinary module tree, traceable by torch.fx (shapes come from x.size(), no data-dependent
control flow). `CASES` is the workload: a few batch sizes and sequence lengths with weights.
"""
import math

import torch
import torch.nn as nn

BATCH = 4
SEQ = 64
DIM = 128
HEADS = 4
LAYERS = 2
MAX_SEQ = 128          # the causal mask buffer's size: the longest sequence the model accepts

CASES = [
    {"name": "b4_t64", "weight": 3.0, "BATCH": 4, "SEQ": 64},
    {"name": "b2_t128", "weight": 2.0, "BATCH": 2, "SEQ": 128},
    {"name": "b8_t32", "weight": 1.0, "BATCH": 8, "SEQ": 32},
]


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int, max_seq: int):
        super().__init__()
        self.heads = heads
        self.head_dim = dim // heads
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(max_seq, max_seq)))

    def forward(self, x):
        b, t, c = x.size()
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        # narrow, not self.mask[:t, :t]: a slice bound that is a traced size cannot index a
        # buffer under torch.fx, while narrow's arguments are traced like any call's.
        causal = self.mask.narrow(0, 0, t).narrow(1, 0, t)
        scores = scores.masked_fill(causal == 0, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        y = (weights @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.out_proj(y)


class MLP(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.fc_in = nn.Linear(dim, 4 * dim)
        self.fc_out = nn.Linear(4 * dim, dim)

    def forward(self, x):
        return self.fc_out(gelu_tanh(self.fc_in(x)))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, max_seq: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads, max_seq)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Model(nn.Module):
    def __init__(self, dim: int, heads: int, layers: int, max_seq: int):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim, heads, max_seq) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(dim)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)


def get_inputs():
    return [torch.randn(BATCH, SEQ, DIM)]


def get_init_inputs():
    return [DIM, HEADS, LAYERS, MAX_SEQ]
