"""Per-pixel cross-entropy of a segmentation map (N, C, H, W) with label smoothing and an
ignored label, summed over the pixels and divided by the number of labelled ones (mean)."""
import torch
import torch.nn as nn

BATCH = 8
CLASSES = 19
HEIGHT = 64
WIDTH = 64
IGNORE = 255

CASES = [
    {"name": "8x19x64x64", "weight": 2.0, "BATCH": 8, "CLASSES": 19, "HEIGHT": 64, "WIDTH": 64},
    {"name": "tail_5x7x33x45", "weight": 1.0, "BATCH": 5, "CLASSES": 7, "HEIGHT": 33,
     "WIDTH": 45},
]


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.loss = nn.CrossEntropyLoss(ignore_index=IGNORE, label_smoothing=0.1)

    def forward(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.loss(logits, labels)


def get_inputs():
    labels = torch.randint(0, CLASSES, (BATCH, HEIGHT, WIDTH))
    labels[:, :4, :] = IGNORE          # an unlabelled border
    return [torch.randn(BATCH, CLASSES, HEIGHT, WIDTH), labels]


def get_init_inputs():
    return []
