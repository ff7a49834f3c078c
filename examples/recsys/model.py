"""A small recommendation model (DLRM / NFM style) whose hot operators are kernelevolve problems.

    dense  (B, 13) fp32 ------> bottom MLP: Linear(13, 512) -> norm_act -> Linear(512, 64)
                                                                                  | (B, 64)
    sparse (16, B, 20) int64 -> 16 x embedding_bag (20000 x 64 table, sum over a bag of 20)
                                                                                  | 16 x (B, 64)
    stack [bottom, bags...] -> (B, 17, 64) -> fm_interaction (Bi-Interaction)  -> (B, 64)
    concat [bottom, interaction] (B, 128) -> top MLP: Linear(128, 512) -> norm_act
                                                      -> Linear(512, 1) -> logit (B, 1)

The submodules that are a problem's `Model` (the very class, imported from the problem file,
so `kernelevolve.patch` recognises them by class) and the problem each was validated on:

    bottom.norm, top.norm       norm_act.py        RMSNorm(512, eps 1e-6) + SiLU on (B, 512)
    embeddings.0 .. .15         embedding_bag.py   (B, 20) int64 -> (B, 64), table 20000 x 64
    interaction                 fm_interaction.py  (B, 17, 64) -> (B, 64)

Every size here is one the problems' CASES use, except the batch, which the cases vary over
333..2048 (odd sizes included), so any batch in that range is inside their validated region.
The sparse input is feature-major, (NUM_SPARSE, B, BAG) as in torchrec's layout, so each
feature's (B, BAG) indices are a contiguous slice. The rest (nn.Linear, stack, cat) is plain
PyTorch.

    from model import make_model, make_inputs          # or import by path from anywhere
    model = make_model()
    logit = model(*make_inputs(1024))                  # (1024, 1)
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import torch
import torch.nn as nn

HERE = Path(__file__).resolve().parent


def _load(problem: str):
    """The problem module examples/recsys/<problem>.py, loaded by path under a stable name."""
    name = f"recsys_{problem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HERE / f"{problem}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


norm_act = _load("norm_act")
embedding_bag = _load("embedding_bag")
fm_interaction = _load("fm_interaction")

# Sizes: each one a value the problems' CASES validate.
NUM_DENSE = 13                               # Criteo-style dense features
NUM_SPARSE = 16                              # sparse features, one table each
HIDDEN = norm_act.HIDDEN                     # 512
EPS = norm_act.EPS                           # 1e-6
EMBED_DIM = embedding_bag.DIM                # 64
NUM_EMBEDDINGS = embedding_bag.NUM_EMBEDDINGS  # 20000 rows per table
BAG = embedding_bag.BAG                      # 20 ids per bag
FIELDS = NUM_SPARSE + 1                      # the 16 bags and the bottom MLP's output
assert FIELDS == fm_interaction.FIELDS and EMBED_DIM == fm_interaction.DIM
EXAMPLE_BATCH = 1024                         # inside the cases' batch range 333..2048


class MLP(nn.Module):
    """Linear -> RMSNorm + SiLU (the norm_act problem's Model) -> Linear."""

    def __init__(self, d_in: int, hidden: int, d_out: int, eps: float):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.norm = norm_act.Model(hidden, eps)
        self.fc2 = nn.Linear(hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.norm(self.fc1(x)))


class RecModel(nn.Module):
    def __init__(self, num_dense: int = NUM_DENSE, num_sparse: int = NUM_SPARSE,
                 num_embeddings: int = NUM_EMBEDDINGS, embed_dim: int = EMBED_DIM,
                 hidden: int = HIDDEN, eps: float = EPS):
        super().__init__()
        self.bottom = MLP(num_dense, hidden, embed_dim, eps)
        self.embeddings = nn.ModuleList(
            embedding_bag.Model(num_embeddings, embed_dim) for _ in range(num_sparse))
        self.interaction = fm_interaction.Model()
        self.top = MLP(2 * embed_dim, hidden, 1, eps)

    def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
        """dense (B, num_dense) fp32, sparse (num_sparse, B, BAG) int64 -> logit (B, 1)."""
        x = self.bottom(dense)                                            # (B, D)
        bags = [bag(sparse[i]) for i, bag in enumerate(self.embeddings)]  # each (B, D)
        fields = torch.stack([x, *bags], dim=1)                           # (B, F, D)
        pairs = self.interaction(fields)                                  # (B, D)
        return self.top(torch.cat([x, pairs], dim=1))                     # (B, 1)


def make_model(seed: int = 0) -> RecModel:
    """The model in eval mode, with seeded weights; embedding tables at 0.1 scale so that the
    interaction's inputs are of the size the fm_interaction problem checks."""
    torch.manual_seed(seed)
    model = RecModel()
    with torch.no_grad():
        for bag in model.embeddings:
            bag.embedding.weight.mul_(0.1 / BAG ** 0.5)
    return model.eval()


def make_inputs(batch: int = EXAMPLE_BATCH, seed: int = 0) -> list[torch.Tensor]:
    """[dense (batch, 13) fp32, sparse (16, batch, 20) int64], seeded."""
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(batch, NUM_DENSE, generator=g)
    sparse = torch.randint(0, NUM_EMBEDDINGS, (NUM_SPARSE, batch, BAG), dtype=torch.int64,
                           generator=g)
    return [dense, sparse]
