"""Cross-entropy loss over class logits with class-index targets (mean over the batch)."""
import torch
import torch.nn as nn

BATCH = 2048
CLASSES = 500

CASES = [
    {"name": "2048x500", "weight": 2.0, "BATCH": 2048, "CLASSES": 500},
    {"name": "tail_1531x377", "weight": 1.0, "BATCH": 1531, "CLASSES": 377},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.loss(logits, targets)


def get_inputs():
    return [torch.randn(BATCH, CLASSES), torch.randint(0, CLASSES, (BATCH,))]


def get_init_inputs():
    return []
