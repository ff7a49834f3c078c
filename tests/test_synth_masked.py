"""Masked pooling over a sequence (synth/plan_mid.py's per-step ROW values): a (B, S) mask read
once per step of the walk down S over x (B, S, D), in both languages. One problem returns
every variant (so each language compiles once): a masked sum with a bool mask, a masked mean
(`sum / mask.sum(1, keepdim=True).clamp(min=1)`, the sentence-embedding pooling), a masked
max (`masked_fill(~mask, -inf).amax(1)`), a masked mean over (B, S, H, W), a masked
softmax over S, and sentence-transformers' mean pooling (an int64 mask expanded to full size), a bool mask's mean (its count an integer sum
before the kernel). The mask is ragged and one row is all masked: torch gives 0 for its mean
(0 / clamp(0, min=1)), -inf for its max and NaN for its softmax; the drafts must give the
same. A mask's count broadcast against the wrong dims
is refused, in words that point to a seed or --llm."""
from __future__ import annotations

import pytest
import torch

from kernelevolve.problem import import_module
from kernelevolve.synth import explain_problem, synthesize
from kernelevolve.synth.plan import explain
from short_timing import evaluate_short

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, m, mb, y, my, mi):
        s = (x * mb.unsqueeze(-1)).sum(1)
        mean = (x * m.unsqueeze(-1)).sum(1) / m.sum(1, keepdim=True).clamp(min=1)
        mx = x.masked_fill(~mb.unsqueeze(-1), float("-inf")).amax(1)
        mean4 = (y * my[:, :, None, None]).sum(1) / my.sum(1, True).clamp(min=1)[:, :, None]
        soft = x.masked_fill(~mb.unsqueeze(-1), float("-inf")).softmax(1)
        e = mi.unsqueeze(-1).expand(x.size()).float()     # sentence-transformers' pooling
        st = torch.sum(x * e, 1) / torch.clamp(e.sum(1), min=1e-9)
        bmean = (x * mb.unsqueeze(-1)).sum(1) / mb.sum(1, keepdim=True).clamp(min=1)
        return s, mean, mx, mean4, soft, st, bmean


def _mask(lengths, s):
    return torch.arange(s)[None, :] < torch.tensor(lengths)[:, None]


def get_inputs():
    mb = _mask([7, 0, 3], 7)          # ragged, row 1 all masked
    my = _mask([0, 2, 5, 1], 5)
    return [torch.randn(3, 7, 5), mb.float(), mb, torch.randn(4, 5, 3, 2), my.float(),
            mb.long()]


def get_init_inputs():
    return []
'''


@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_masked_pooling_drafts_match_torch(tmp_path, monkeypatch, language):
    monkeypatch.setenv("KERNELEVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    problem = tmp_path / "masked.py"
    problem.write_text(PROBLEM)
    source, p = synthesize(str(problem), language)
    assert not [n for n in p.kept if p.graph.values[n].op not in ("unsqueeze", "expand")], \
        explain(p)
    assert all(k.mid_dim == 1 for k in p.kernels) and len(p.kernels) == 7, explain(p)
    candidate = tmp_path / f"masked_{language}.py"
    candidate.write_text(source)
    ref = import_module(problem, "masked", wrap_errors=False)
    cand = import_module(candidate, f"masked_{language}", wrap_errors=False)
    inputs = ref.get_inputs()
    with torch.no_grad():
        want, got = ref.Model()(*inputs), cand.ModelNew()(*inputs)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g.shape == w.shape and g.dtype == w.dtype, i
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-5, equal_nan=True), f"output {i}"
    # the all-masked rows: torch's 0 for the clamped mean, -inf for the max
    assert (want[1][1] == 0).all() and (got[1][1] == 0).all()
    assert (got[2][1] == float("-inf")).all() and (got[3][0] == 0).all()
    assert (got[0][1] == 0).all() and (got[5][1] == 0).all() and (got[6][1] == 0).all() and got[4][1].isnan().all() and not got[4][0].isnan().any()


def test_a_count_broadcast_against_the_wrong_dims_is_refused_in_plain_words(tmp_path):
    problem = tmp_path / "wrong.py"
    # the count (B, 1) of (B, S) against (B, H, W): torch aligns it with (H, W), not B
    problem.write_text(PROBLEM.replace("[:, :, None]", "")
                       .replace("torch.randn(4, 5, 3, 2)", "torch.randn(4, 5, 4, 1)"))
    text = explain_problem(str(problem))
    lines = text.splitlines()
    assert lines[0].startswith("not covered: ") and "broadcasts against the wrong dims" in text
    assert "--seed-candidate FILE" in lines[1] and "--llm" in lines[1], text


@pytest.mark.slow
@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_masked_sum_mean_max_drafts_accepted_by_the_harness(evaluator, tmp_path, language):
    """The drafts through the sandboxed harness (compiled, every case checked against torch,
    integrity, timed): accepted with a ragged mask and an all-masked row, in both languages."""
    problem = tmp_path / "masked.py"
    problem.write_text(PROBLEM)
    source, _ = synthesize(str(problem), language)
    candidate = tmp_path / f"masked_{language}.py"
    candidate.write_text(source)
    result = evaluate_short(evaluator, problem, candidate)
    assert result.accepted, result.reason
    assert result.cases and all(c.correct for c in result.cases)
