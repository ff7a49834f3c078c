"""A reference slow enough per call (a Python loop of 5 ms or more, then one op) that the
measurement's batches hold one call each (harness/worker/measure.py calls_per_batch): a
candidate whose every second call is slower (alternating_time_candidate.py) then gives timed
batches that alternate too, so its speedup interval is wide whatever the machine's load: what
the timing line and the wide-interval warning are tested on (tests/test_timing_notes.py). The
loop is plain Python, not tensor ops, so the gates' op tracing stays cheap."""
import torch
import torch.nn as nn

_SPIN = 600_000  # loop iterations per call: 5 ms or more (CPython 3.11+: 8-50 ns each),
                 # above the 2.5 ms a batch is sized to, so every batch holds one call

CASES = [{"name": "16x16", "weight": 1.0}]


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(_SPIN):
            pass
        return torch.relu(x)


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
