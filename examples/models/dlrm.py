"""A small DLRM-style click-through model: dense features through a bottom MLP, sparse features
through embedding bags, a pairwise dot-product interaction, and a top MLP to one logit.

    dense  (BATCH, NUM_DENSE) fp32  -> bottom MLP [Linear -> LayerNorm -> SiLU] x 2 -> (BATCH, DIM)
    sparse (NUM_SPARSE, BATCH, BAG) int64 -> nn.EmbeddingBag(mode="sum") per feature -> (BATCH, DIM)
    stack [bottom, bags...] (BATCH, F, DIM) -> Z = T @ T^T, strictly-lower triangle (F*(F-1)/2)
    cat [bottom, pairs] -> top MLP [Linear -> LayerNorm -> SiLU] -> Linear(., 1) -> (BATCH, 1)

Ordinary PyTorch in the shape of the DLRM reference model (the triangle is taken with a
registered index buffer, so the forward has no data-dependent control flow and traces with
torch.fx). The sparse input is feature-major, (NUM_SPARSE, BATCH, BAG) as in torchrec's layout:
feature i's (BATCH, BAG) bags are sparse[i], looked up in table i.
`CASES` is the workload: serving batch sizes with weights.
"""
import torch
import torch.nn as nn

BATCH = 512
NUM_DENSE = 13
NUM_SPARSE = 8
NUM_EMBEDDINGS = 10000
BAG = 16
DIM = 32
HIDDEN = 256

CASES = [
    {"name": "b512", "weight": 3.0, "BATCH": 512},
    {"name": "b128", "weight": 2.0, "BATCH": 128},
    {"name": "b1024", "weight": 1.0, "BATCH": 1024},
]


class MLPLayer(nn.Module):
    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.linear = nn.Linear(d_in, d_out)
        self.norm = nn.LayerNorm(d_out)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.act(self.norm(self.linear(x)))


class DotInteraction(nn.Module):
    """Pairwise dot products of the feature vectors, the strictly-lower triangle, flattened."""

    def __init__(self, num_features: int):
        super().__init__()
        rows, cols = torch.tril_indices(num_features, num_features, offset=-1)
        self.register_buffer("flat_index", rows * num_features + cols)

    def forward(self, features):
        b, f, d = features.shape
        z = torch.bmm(features, features.transpose(1, 2))
        return z.reshape(b, f * f)[:, self.flat_index]


class Model(nn.Module):
    def __init__(self, num_dense: int, num_sparse: int, num_embeddings: int, dim: int,
                 hidden: int):
        super().__init__()
        self.bottom = nn.Sequential(MLPLayer(num_dense, hidden), MLPLayer(hidden, dim))
        self.embeddings = nn.ModuleList(
            [nn.EmbeddingBag(num_embeddings, dim, mode="sum") for _ in range(num_sparse)])
        features = num_sparse + 1
        self.interaction = DotInteraction(features)
        pairs = features * (features - 1) // 2
        self.top = nn.Sequential(MLPLayer(dim + pairs, hidden), MLPLayer(hidden, hidden // 2),
                                 nn.Linear(hidden // 2, 1))

    def forward(self, dense, sparse):
        x = self.bottom(dense)
        pooled = [bag(sparse[i]) for i, bag in enumerate(self.embeddings)]
        features = torch.stack([x] + pooled, dim=1)
        pairs = self.interaction(features)
        return self.top(torch.cat([x, pairs], dim=1))


def get_inputs():
    dense = torch.randn(BATCH, NUM_DENSE)
    sparse = torch.randint(0, NUM_EMBEDDINGS, (NUM_SPARSE, BATCH, BAG), dtype=torch.int64)
    return [dense, sparse]


def get_init_inputs():
    return [NUM_DENSE, NUM_SPARSE, NUM_EMBEDDINGS, DIM, HIDDEN]
