"""A small convolutional image classifier: a stem and two stages of conv -> batch norm -> ReLU,
each stage ending in pooling, then a global average pool and a linear head. fp32, NCHW.

    x (BATCH, 3, SIZE, SIZE) -> stem  [Conv3x3(3->16) -> BN -> ReLU]
                             -> stage [Conv3x3 -> BN -> ReLU] x 2, MaxPool2d(2)     16 -> 32
                             -> stage [Conv3x3 -> BN -> ReLU] x 2, MaxPool2d(2)     32 -> 64
                             -> AdaptiveAvgPool2d(1) -> flatten -> Linear(64, CLASSES)

Ordinary PyTorch as a VGG/ResNet-style trunk is usually written (the batch norms run in eval
mode with their running statistics, as in serving). Traceable by torch.fx. `CASES` is the
workload: batch sizes and image sizes with weights.
"""
import torch
import torch.nn as nn

BATCH = 8
CHANNELS = 3
SIZE = 32
WIDTH = 16
CLASSES = 10

CASES = [
    {"name": "b8_32px", "weight": 3.0, "BATCH": 8, "SIZE": 32},
    {"name": "b2_64px", "weight": 1.0, "BATCH": 2, "SIZE": 64},
    {"name": "b12_32px", "weight": 1.0, "BATCH": 12, "SIZE": 32},
]


class ConvBNAct(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size=3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c_out)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Stage(nn.Module):
    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv1 = ConvBNAct(c_in, c_out)
        self.conv2 = ConvBNAct(c_out, c_out)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(self.conv2(self.conv1(x)))


class Model(nn.Module):
    def __init__(self, channels: int, width: int, classes: int):
        super().__init__()
        self.stem = ConvBNAct(channels, width)
        self.stage1 = Stage(width, 2 * width)
        self.stage2 = Stage(2 * width, 4 * width)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(4 * width, classes)

    def forward(self, x):
        x = self.stage2(self.stage1(self.stem(x)))
        return self.head(torch.flatten(self.pool(x), 1))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, WIDTH, CLASSES]
