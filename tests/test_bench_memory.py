"""The bench's memory estimate counts what the reference's forward allocates (memory_peak.py,
traced on the meta device): small inputs whose reference makes a huge intermediate are skipped
with the figure; a problem that fits, or whose forward meta cannot run, is let through."""
from __future__ import annotations

import pytest

from kernelevolve.memory_estimate import estimate, too_big

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn({n})]


def get_init_inputs():
    return []
'''
GIB = 1024 ** 3
OUTER = "(x.unsqueeze(-1) * x.unsqueeze(-2)).sum(-1)"


def _problem(tmp_path, expr: str, n: int):
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.format(expr=expr, n=n))
    return path


def test_a_huge_intermediate_from_small_inputs_is_skipped_with_the_figure(tmp_path):
    n = 2 ** 17                    # 512 KiB of input, a 64 GiB product
    path = _problem(tmp_path, OUTER, n)
    found = estimate(path)
    assert found["bytes"] == 4 * n
    # the product (n*n floats) is live with its row sums at the peak
    assert found["peak"] == 4 * n * n + 4 * n
    reason = too_big(path, available=16 * GIB)
    assert reason.startswith("needs about 128.0 GiB (case default: 0.00 GiB of inputs")
    assert "forward peaks at 64.00 GiB" in reason and reason.endswith("16.0 GiB available")


@pytest.mark.parametrize("expr", [OUTER, "torch.relu(x) + 1"])
def test_a_problem_that_fits_runs(tmp_path, expr):
    path = _problem(tmp_path, expr, 1024)
    assert too_big(path, available=16 * GIB) is None
    if expr == OUTER:   # inputs, and twice the 4 MiB product with its row sums
        need = 4096 + 2 * (4 * 1024 * 1024 + 4096)
        assert too_big(path, available=need) is None
        assert too_big(path, available=need - 1).startswith("needs about 0.0 GiB")


def test_a_forward_meta_cannot_run_falls_back_to_the_inputs(tmp_path):
    path = _problem(tmp_path, "torch.nonzero(x > 0).float()", 2 ** 20)
    found = estimate(path)
    assert found["peak"] == 0 and found["bytes"] == 4 * 2 ** 20
    assert too_big(path, available=4 * 4 * 2 ** 20) is None
    assert too_big(path, available=4 * 4 * 2 ** 20 - 1).startswith("needs about 0.0 GiB")
