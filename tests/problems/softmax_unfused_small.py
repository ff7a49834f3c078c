"""tests/problems/softmax_unfused.py's model (row softmax as five separate torch ops) at
softmax_small.py's sizes, 8-16x fewer elements per case: for the LLM operator's searches, whose
subject is the operator (prompts, repairs, retries, notes, budgets), not the sizes. The fused
kernel's margin over the five eager ops holds here too (each op's fixed cost weighs more on
small inputs)."""
import torch
import torch.nn as nn

BATCH = 64
DIM = 1024

CASES = [
    {"name": "64x1024", "weight": 2.0, "BATCH": 64, "DIM": 1024},
    {"name": "16x4096", "weight": 1.0, "BATCH": 16, "DIM": 4096},
    {"name": "tail_33x999", "weight": 1.0, "BATCH": 33, "DIM": 999},
]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        top = x.amax(dim=-1, keepdim=True)
        e = torch.exp(x - top)
        return e / e.sum(dim=-1, keepdim=True)


def get_inputs():
    return [4.0 * torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
