"""An outer product whose output (2049 x 4096 float32, 32 MiB and a row) is larger than the
input by far: every timed call writes more than half of what the outside measurement used to
check per case in all (64 MiB), so only its first two timed batches were ever read. Used by
tests/corpus/bad_output_size_liar.py."""
import torch
import torch.nn as nn

ROWS = 2049
COLS = 4096


class Model(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.outer(a, b)


def get_inputs():
    return [torch.randn(ROWS), torch.randn(COLS)]


def get_init_inputs():
    return []
