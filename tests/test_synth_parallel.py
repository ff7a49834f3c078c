"""Full reductions and row scans on every core (emit_cpp_split.py, emit_cpp_solo_split.py): a
row kernel or solo kernel over fewer rows than threads cuts each row into fixed blocks shared by
the threads. Synthesized C++ built with the real g++, run on edge inputs (NaN, +-inf, ties of
the extreme across blocks, sizes just below and above the split, odd sizes) and compared with
torch; the same input twice gives the same bits (blocks combine in a fixed order)."""
from __future__ import annotations

import pytest
import torch

from kernelevolve.problem import import_module
from kernelevolve.synth import synthesize
from kernelevolve.synth.emit_cpp_solo_split import SPLIT_N
from kernelevolve.synth.emit_cpp_split import SPLIT_COLS

OPS = ("x.sum(), x.amin(), x.var(), torch.max(x), torch.argmax(x), torch.argmin(x), "
       "torch.prod(1 + x * 1e-3), (x > 0).sum(), torch.any(x > 3), torch.all(x > -3), "
       "torch.min(x, dim=-1), torch.cumsum(x, -1), torch.cummax(x, -1), "
       "torch.logcumsumexp(x, -1), "
       "torch.cumprod(1 + x * 1e-3, -1)")

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ({ops})


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
'''

# PARALLEL_MIN_ELEMENTS is set to 0 so that small rows split (the tests stay fast); a row of
# 2 * SPLIT - 1 never splits; three rows of 40001 are 8 blocks and an odd tail to reduce
# over everything, and one row group of three 3-block rows to scan (block by block); a row of
# 140001 is 9 blocks: two whole groups a scan's second pass interleaves and a short one.
CASES = [(1, 2 * SPLIT_COLS - 1), (3, 40001), (1, 140001)]


def _inputs(shape, nan: bool) -> torch.Tensor:
    g = torch.Generator().manual_seed(11)
    x = torch.randn(shape, generator=g).round(decimals=1)
    n = shape[-1]
    x[0, 5] = x[0, n - 3] = 9.0             # a tie of the maximum, first and last block
    x[-1, n // 2] = x[-1, 7] = -9.0         # and of the minimum
    if nan:
        x[0, n - 2] = float("nan")          # the last block's NaN ...
        x[0, n // 3] = float("nan")         # ... after an earlier one, which wins
        x[-1, 11] = float("inf")
        x[-1, n - 1] = -float("inf")
    return x


def _flat(out) -> list[torch.Tensor]:
    res = []
    for o in out:
        res += [o] if isinstance(o, torch.Tensor) else list(o)
    return res


def _close(ref: torch.Tensor, got: torch.Tensor, want_dtype: torch.dtype) -> None:
    assert got.dtype == want_dtype and got.shape == ref.shape, (got.dtype, want_dtype)
    if not ref.dtype.is_floating_point:
        assert torch.equal(ref.to(got.dtype), got)
        return
    assert torch.equal(ref.isnan(), got.isnan())
    assert torch.allclose(ref, got.double(), rtol=1e-5, atol=1e-4, equal_nan=True), \
        (ref - got.double()).abs().nan_to_num().max()


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.equal(a.isnan(), b.isnan()) if a.dtype.is_floating_point and \
        bool(a.isnan().all()) else torch.equal(a.nan_to_num(), b.nan_to_num())


@pytest.mark.parametrize("shape", CASES, ids=[f"{s[0]}x{s[1]}" for s in CASES])
def test_split_reductions_and_scans_match_torch(tmp_path, shape):
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.format(ops=OPS, shape=", ".join(map(str, shape))))
    source, plan = synthesize(str(path), "cpp")
    assert f"cols >= 2 * {SPLIT_COLS}" in source and f"n >= 2 * {SPLIT_N}" in source
    source = source.replace("\nPARALLEL_MIN_ELEMENTS = 262144\n",
                            "\nPARALLEL_MIN_ELEMENTS = 0\n")
    (tmp_path / "cand.py").write_text(source)
    tag = f"{shape[0]}x{shape[1]}"
    cand = import_module(tmp_path / "cand.py", f"split_cand_{tag}", wrap_errors=False).ModelNew()
    model = import_module(path, f"split_ref_{tag}", wrap_errors=False).Model()
    for nan in (False, True):
        x = _inputs(shape, nan)
        want = [t.dtype for t in _flat(model(x))]
        # torch's float32 prod / cumprod lose ~1e-3 over 1e5 factors; ours accumulate in
        # double: both are checked against torch run in double
        ref = _flat(model(x.double()))
        got = _flat(cand(x))
        assert len(got) == len(ref)
        for r, g, d in zip(ref, got, want):
            _close(r, g, d)
        again = _flat(cand(x.clone()))
        assert all(_same_bits(a, b) for a, b in zip(got, again))


def test_whole_1d_sum_and_mean_are_covered_and_split(tmp_path):
    """`x.sum()` / `x.mean()` of a 1-d tensor: the reduction over its one dim (before, the
    whole-tensor op stayed in torch: "no fusable op"), cut into blocks above the split."""
    n = 2 * SPLIT_COLS + 5
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.format(ops="x.sum(), x.mean(), (x * 2).sum()", shape=n))
    source, _ = synthesize(str(path), "cpp")
    assert "torch.sum" not in source and "aten.sum" not in source and "aten.mean" not in source
    (tmp_path / "cand.py").write_text(source.replace("\nPARALLEL_MIN_ELEMENTS = 262144\n",
                                                     "\nPARALLEL_MIN_ELEMENTS = 0\n"))
    cand = import_module(tmp_path / "cand.py", "split_cand_1d", wrap_errors=False).ModelNew()
    model = import_module(path, "split_ref_1d", wrap_errors=False).Model()
    x = torch.randn(n, generator=torch.Generator().manual_seed(3))
    for planted in (None, float("inf"), float("nan")):
        if planted is not None:
            x[n - 2] = planted
        for r, g in zip(model(x.double()), cand(x)):
            _close(r, g, torch.float32)
