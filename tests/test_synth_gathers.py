"""Class-index losses end to end (plan_loss.py, emit_loss.py): cross_entropy and nll_loss
synthesized in both languages (C++ built with the real compiler, Triton under its
interpreter), run on edge inputs and compared with torch: targets at the class bound C-1,
ignored targets (all of them: mean is NaN, sum 0), label smoothing, class weights, a single
class, (N, C, d1, ...) inputs, odd sizes; an out-of-range target raises IndexError as torch
does. A size-dependent number (batchmean's 1 / N, label smoothing's eps / C) is read at call
time (lift.py), so problems whose cases differ in it synthesize too."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from kernelevolve.problem import import_module
from kernelevolve.synth import explain_problem, synthesize
from kernelevolve.synth.capture import NotCovered

KB = Path(__file__).resolve().parent.parent / "benchmarks" / "kb_suite"

PROBLEM = '''import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPE = {shape}
{cases}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("w", torch.linspace(0.5, 2.0, SHAPE[1]))

    def forward(self, x, t):
        return {expr}


def get_inputs():
    return [torch.randn(SHAPE), torch.randint(0, SHAPE[1], (SHAPE[0],) + SHAPE[2:])]


def get_init_inputs():
    return []
'''

LOSSES = [
    ("F.cross_entropy(x, t, reduction='sum', ignore_index=3)", (7, 5)),
    ("F.cross_entropy(x, t, weight=self.w, ignore_index=2)", (6, 5)),
    ("F.cross_entropy(x, t, reduction='none', ignore_index=1)", (3, 5, 3)),
    ("F.nll_loss(F.log_softmax(x, 1), t, weight=self.w, reduction='sum')", (3, 4, 2, 3)),
    ("F.cross_entropy(x, t, weight=self.w, label_smoothing=0.2, ignore_index=0)", (5, 6)),
    ("F.cross_entropy(x, t, label_smoothing=0.1, reduction='none')", (3, 4, 5)),
    ("F.cross_entropy(x, t)", (5, 1)),
]


def _problem(tmp_path, expr: str, shape: tuple, cases: str = "") -> str:
    path = tmp_path / "problem.py"
    path.write_text(PROBLEM.format(expr=expr, shape=shape, cases=cases))
    return str(path)


def _ignored(expr: str) -> int:
    return int(expr.split("ignore_index=")[1].split(")")[0].split(",")[0]) \
        if "ignore_index" in expr else -100


def _targets(shape: tuple, ignore: int) -> list[torch.Tensor]:
    """A draw with the class bound C-1 and an ignored target, then every target ignored."""
    g = torch.Generator().manual_seed(11)
    c, tshape = shape[1], (shape[0],) + shape[2:]
    t = torch.randint(0, c, tshape, generator=g)
    t.view(-1)[0] = c - 1
    t.view(-1)[-1] = ignore
    return [t, torch.full(tshape, ignore)]


def _same(ref: torch.Tensor, got: torch.Tensor) -> None:
    assert ref.shape == got.shape and ref.dtype == got.dtype, (ref.shape, got.shape)
    assert torch.equal(ref.isnan(), got.isnan()), (ref, got)
    assert torch.allclose(ref, got, rtol=1e-5, atol=1e-5, equal_nan=True), (ref, got)


@pytest.mark.parametrize("language", ["cpp", "triton"])
@pytest.mark.parametrize("expr,shape", LOSSES, ids=[f"{e}-{s}" for e, s in LOSSES])
def test_loss_matches_torch_on_edge_targets(tmp_path, language, expr, shape):
    path = _problem(tmp_path, expr, shape)
    source, plan = synthesize(path, language)
    assert any(getattr(k, "kind", "") == "loss" for k in plan.solos), plan.summary()
    assert all(plan.graph.values[n].op in ("getitem", "view", "_unsafe_view")
               for n in plan.kept), plan.summary()
    (tmp_path / "cand.py").write_text(source)
    tag = f"{language}_{abs(hash((expr, shape)))}"
    cand = import_module(tmp_path / "cand.py", f"gathers_cand_{tag}", wrap_errors=False).ModelNew()
    model = import_module(path, f"gathers_ref_{tag}", wrap_errors=False).Model()
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2)) * 3
    for t in _targets(shape, _ignored(expr)):
        _same(model(x, t), cand(x, t))
    bad = _targets(shape, _ignored(expr))[0]
    bad.view(-1)[1] = shape[1]               # one past the class bound
    with pytest.raises(IndexError):
        model(x, bad)
    with pytest.raises(IndexError):
        cand(x, bad)
    bad.view(-1)[1] = -1 if _ignored(expr) != -1 else -2
    with pytest.raises(IndexError):
        cand(x, bad)


def test_explain_names_the_loss_kernels():
    text = explain_problem(str(KB / "l1_cross_entropy.py"))
    assert "kernel k0 (row kernel" in text and "fuses amax, sub, exp, sum, log, sub" in text
    assert "kernel s0 (a kernel of its own): nll loss: gather of the target class's " \
        "log-probability, mean over the non-ignored targets" in text


def test_label_smoothing_with_an_odd_case_synthesizes():
    text = explain_problem(str(KB / "l2_seg_cross_entropy.py"))
    assert "mid reduction kernel over dim 1" in text
    assert "label smoothing 0.1, mean over the non-ignored targets, ignore_index 255" in text


def test_batchmean_divides_by_the_call_time_batch(tmp_path):
    """KLDivLoss(batchmean)'s 1 / N differs per case: the held-out odd case traced another
    graph before; now the divisor is read from the input's size at call time."""
    source, plan = synthesize(str(KB / "l1_kl_div_batchmean.py"), "cpp")
    assert "predictions.shape[0]" in source, source
    (tmp_path / "kl.py").write_text(source)
    cand = import_module(tmp_path / "kl.py", "gathers_kl_cpp", wrap_errors=False).ModelNew()
    ref = import_module(KB / "l1_kl_div_batchmean.py", "gathers_kl_ref", wrap_errors=False).Model()
    for rows, cols in ((7, 5), (3, 11), (1, 2)):
        p, t = torch.rand(rows, cols).softmax(-1), torch.rand(rows, cols).softmax(-1)
        _same(ref(p, t), cand(p, t))


def test_a_number_no_size_explains_is_still_refused(tmp_path):
    """A case-dependent number that is not a size times or over a constant keeps the old
    refusal (a clear one-line reason)."""
    path = tmp_path / "odd.py"
    path.write_text(PROBLEM.format(expr="x * float(SHAPE[0] ** 2 + 1)", shape=(4, 3),
                                   cases='CASES = [{"name": "a", "SHAPE": (4, 3)}, '
                                         '{"name": "tail_5x3", "SHAPE": (5, 3)}, '
                                         '{"name": "c", "SHAPE": (9, 3)}]\n')
                    .replace('        self.register_buffer("w", torch.linspace(0.5, 2.0, '
                             'SHAPE[1]))\n', ""))
    with pytest.raises(NotCovered, match="traces to a different graph"):
        synthesize(str(path), "cpp")



@pytest.mark.parametrize("expr,op", [("F.multi_margin_loss(x, t)", "arange"),
                                     ("F.hinge_embedding_loss(x, torch.where(x > 0, 1.0, -1.0))",
                                      "empty_permuted")])
def test_a_size_number_a_torch_op_takes_is_refused(tmp_path, expr, op):
    """A number made of an input's size becomes a 0-d tensor the kernels read; an op kept in
    torch needs a Python number or a size there (`arange(0, C)`, a shape list), and its draft
    raised at run time ("Cannot cast tensor(128.) to number"). It is refused with the reason."""
    path = tmp_path / "sized.py"
    path.write_text(PROBLEM.format(expr=expr, shape=(4, 6),
                                   cases='CASES = [{"name": "a", "SHAPE": (4, 6)}, '
                                         '{"name": "tail", "SHAPE": (3, 5)}]\n')
                    .replace('        self.register_buffer("w", torch.linspace(0.5, 2.0, '
                             'SHAPE[1]))\n', ""))
    with pytest.raises(NotCovered, match=f"{op} stays in torch but takes a number"):
        synthesize(str(path), "cpp")

SCALED = '''import torch
import torch.nn as nn
B = 4
D = 16
CASES = [{{"name": "a", "B": 4, "D": 16}}, {{"name": "tail", "B": {b}, "D": 9}}]
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x / (x.size(-1) ** 0.5), dim=-1)
def get_inputs():
    return [torch.randn(B, D)]
def get_init_inputs():
    return []
'''


def test_a_sqrt_size_is_read_at_call_time_unless_another_size_fits(tmp_path):
    """1 / sqrt(x.size(-1)) becomes sqrt(D) read from x; when B is 4 and 3 as sqrt(D) is,
    the cases cannot tell which the forward read, and the problem is refused."""
    path = tmp_path / "scaled.py"
    path.write_text(SCALED.format(b=5))
    source, _ = synthesize(str(path), "cpp")
    assert "x.shape[1] ** 0.5" in source
    path.write_text(SCALED.format(b=3))
    with pytest.raises(NotCovered, match="traces to a different graph"):
        synthesize(str(path), "cpp")


SELECT = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, table, idx):
        return {expr}


def get_inputs():
    return [torch.randn(11, 7), torch.randint(0, 11, (9,))]


def get_init_inputs():
    return []
'''
SELECTS = ["(torch.index_select(table, 0, idx) * 2).amax(-1)",
           "torch.index_select(table, 0, idx).exp().mean(0)"]


@pytest.mark.parametrize("language", ["cpp", "triton"])
@pytest.mark.parametrize("expr", SELECTS)
def test_index_select_rows_fuse_as_a_gather(tmp_path, language, expr):
    """index_select of a 2-D table's rows is an embedding lookup: it fuses with what reads
    it (a row or a mid reduction), and a bad index raises IndexError without being read."""
    path = tmp_path / "select.py"
    path.write_text(SELECT.format(expr=expr))
    source, plan = synthesize(str(path), language)
    assert len(plan.kernels) == 1 and not plan.kept, plan.summary()
    (tmp_path / "cand.py").write_text(source)
    tag = f"{language}_{abs(hash(expr))}"
    cand = import_module(tmp_path / "cand.py", f"select_cand_{tag}", wrap_errors=False).ModelNew()
    model = import_module(path, f"select_ref_{tag}", wrap_errors=False).Model()
    table = torch.randn(11, 7, generator=torch.Generator().manual_seed(4))
    idx = torch.tensor([10, 0, 3, 3, 10, 1, 2, 9, 5])    # the bound, repeats, odd length
    _same(model(table, idx), cand(table, idx))
    idx[4] = 11
    with pytest.raises(IndexError):
        cand(table, idx)
