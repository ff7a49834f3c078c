"""Pool kernels end to end (plan_pool.py, emit_cpp_pool.py, triton_pool.py): max, average and
adaptive average pooling over 1, 2 and 3 dims, synthesized in both languages (C++ built with
the real compiler, Triton under its interpreter), run on edge inputs and compared with torch:
exact for indices, within 1e-5 (NaN where torch has NaN) for values, same dtypes and shapes.
Each problem pools three inputs (1-d, 2-d, 3-d) several ways, so a language compiles once per
family; the inputs plant NaN (two in one window: the last one's index), -inf planes (a max
window of padding and -inf), ties, and the second run uses odd, non-contiguous inputs."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelevolve.problem import import_module
from kernelevolve.synth import explain_problem, synthesize
from short_timing import evaluate_short

KB = Path(__file__).resolve().parents[1] / "benchmarks" / "kb_suite"

PROBLEM = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, z, x, y):
        return ({exprs},)


def get_inputs():
    return [torch.randn(2, 3, 13), torch.randn(2, 3, 9, 11), torch.randn(2, 2, 5, 6, 7)]


def get_init_inputs():
    return []
'''

FAMILIES = {
    "max": [
        "*F.max_pool1d(z, 3, 2, 1, ceil_mode=True, return_indices=True)",
        "F.max_pool1d(z, 1)",                                      # a window of 1
        "*F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)",
        "*F.max_pool2d(x, (2, 3), (1, 2), (1, 1), dilation=(2, 1), return_indices=True)",
        "F.max_pool2d(x, 2)",
        "*F.max_pool3d(y, 2, 2, 1, ceil_mode=True, return_indices=True)",
        "*F.max_pool3d(y, 3, 1, 1, dilation=2, return_indices=True)",
    ],
    "avg": [
        "F.avg_pool1d(z, 3, 2, 1, ceil_mode=True)",
        "F.avg_pool1d(z, 4, 3, 2, ceil_mode=True, count_include_pad=False)",
        "F.avg_pool1d(z, 1)",
        "F.avg_pool2d(x, 3, 2, 1, ceil_mode=True)",
        "F.avg_pool2d(x, (2, 3), (2, 1), (1, 0), count_include_pad=False, divisor_override=5)",
        "F.avg_pool3d(y, 3, 2, 1, ceil_mode=True)",
        "F.avg_pool3d(y, 2, 1, 0, count_include_pad=False)",
    ],
    "adaptive": [
        "F.adaptive_avg_pool1d(z, 5)",                             # 13 -> 5: uneven windows
        "F.adaptive_avg_pool2d(x, (4, 3))",
        "F.adaptive_avg_pool2d(x, (10, 12))",                      # more outputs than inputs
        "F.adaptive_avg_pool3d(y, (3, 4, 5))",
    ],
}


def _edges(t: torch.Tensor) -> torch.Tensor:
    """Plant torch's hard cases: two NaN a window apart and next to each other, a plane of
    -inf, a row of ties, a +inf."""
    t = t.round(decimals=1)
    flat = t.view(-1, *t.shape[-2:]) if t.dim() > 2 else t
    flat[0, ..., 1] = float("nan")
    flat[0, ..., 2] = float("nan")
    flat[-1, ..., -1] = float("nan")
    flat[1] = float("-inf")
    flat[-1, 0] = 0.5
    flat[0, -1] = float("inf")
    return t


def _inputs(sizes) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(11)
    return [_edges(torch.randn(s, generator=g)) for s in sizes]


def _same(ref, got) -> None:
    assert len(ref) == len(got)
    for i, (r, g) in enumerate(zip(ref, got)):
        assert r.dtype == g.dtype and r.shape == g.shape, (i, r.dtype, g.dtype, r.shape, g.shape)
        if r.dtype.is_floating_point:
            assert torch.equal(r.isnan(), g.isnan()), (i, r, g)
            assert torch.allclose(r, g, rtol=1e-5, atol=1e-5, equal_nan=True), (i, r, g)
        else:
            assert torch.equal(r, g), (i, r, g)


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_pool_kernels_match_torch_on_edge_inputs(tmp_path, language, family):
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.format(exprs=", ".join(FAMILIES[family])))
    source, plan = synthesize(str(path), language)
    assert len(plan.pools) == len(FAMILIES[family]), plan.summary()
    # nothing pools in torch: only the tuple items and 1-d pools' (un)squeezes stay
    assert all(plan.graph.values[n].op in ("getitem", "squeeze", "unsqueeze")
               for n in plan.kept), plan.summary()
    cand_path = tmp_path / "cand.py"
    cand_path.write_text(source)
    tag = f"{language}_{family}"
    cand = import_module(cand_path, f"pool_cand_{tag}", wrap_errors=False).ModelNew()
    model = import_module(path, f"pool_ref_{tag}", wrap_errors=False).Model()
    xs = _inputs([(2, 3, 13), (2, 3, 9, 11), (2, 2, 5, 6, 7)])
    _same(model(*xs), cand(*xs))
    # odd sizes, non-contiguous inputs: the sizes are read at call time
    ys = [t.transpose(0, 1) for t in _inputs([(3, 1, 10), (3, 1, 7, 12), (3, 1, 4, 7, 5)])]
    _same(model(*ys), cand(*ys))


def test_explain_names_the_pool_kernels():
    text = explain_problem(str(KB / "l1_maxpool2d.py"))
    assert "kernel p0 (a kernel of its own): max pool 3x3 (stride (2, 2), padding (1, 1)" in text
    assert "ceil mode" in text
    text = explain_problem(str(KB / "l1_avgpool3d.py"))
    assert "kernel p0 (a kernel of its own): average pool 3x3x3" in text
    assert "padding not counted" in text
    text = explain_problem(str(KB / "l2_relu_adaptive_avgpool.py"))
    assert "fuses relu" in text and "adaptive average pool over the last 2 dims to (7, 7)" in text


def test_a_pool_on_float64_stays_in_torch(tmp_path):
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.format(exprs="F.max_pool2d(x.double(), 2)"))
    text = explain_problem(str(path))
    assert "not covered: no fusable op" in text and "max_pool2d_with_indices" in text


def test_cpp_pool_draft_accepted_by_the_harness(evaluator, tmp_path):
    source, plan = synthesize(str(KB / "l1_maxpool2d.py"), "cpp")
    assert len(plan.pools) == 1
    cand = tmp_path / "synth_maxpool.py"
    cand.write_text(source)
    result = evaluate_short(evaluator, KB / "l1_maxpool2d.py", cand)
    assert result.accepted, result.reason
    assert all(c.correct for c in result.cases)
