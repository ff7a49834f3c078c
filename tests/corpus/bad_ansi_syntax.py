# problem: problems/softmax_small.py
# expect: static
# reason: \x1b[2J
"""A source line the static gate quotes back: Python's syntax error carries the offending line,
and this one holds raw control bytes (ESC, BEL, a bidi override) inside an unterminated string.
The verdict's reason must show them in a visible form (`\\x1b[2J`). This file holds those
bytes for real: view it with `cat -v`."""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x + "[2J[1;32mACCEPTED 9.870x[0m]0;ACCEPTED ‮DETPECCA
