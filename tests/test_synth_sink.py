"""Reshapes moved above element-wise producers (synth/sink.py): a norm, a nansum, a mean of
squares and a sum of a product over every element are one kernel each, not a full-size
element-wise kernel and a reduction reading it back; a reshape of a broadcast product or of a
value read twice stays where it is; the drafts are accepted by the real harness, NaN and inf
rows included."""
from __future__ import annotations

import pytest

from conftest import PROBLEMS
from short_timing import evaluate_short
from kernelevolve.synth import synthesize
from kernelevolve.synth import plan as plan_mod
from kernelevolve.synth.capture import capture
from kernelevolve.synth.fold import fold_constants
from kernelevolve.synth.sink import sink_views

SINK = PROBLEMS / "synth_sink_views.py"


def _fused(p) -> list[list[str]]:
    return [[n.source_op for n in k.nodes if n.kind != "view"] for k in p.kernels]


def test_each_full_reduction_takes_its_producer():
    p = plan_mod.plan(capture(str(SINK)))
    fused = _fused(p)
    for ops in (["mul", "sum", "sqrt"], ["isnan", "where", "sum"], ["sub", "pow", "mean"],
                ["mul", "sum"]):
        assert ops in fused, fused
    # the broadcast product and the twice-read value keep their own element-wise kernels
    assert ["mul"] in fused and ["abs", "add"] in fused, fused
    # the moved reshapes are torch views of the inputs, one per (input, sizes)
    g = p.graph
    views = [n for n in p.kept if g.values[n].op == "view"
             and g.values[g.values[n].args[0].name].op == "input"]
    sources = [g.values[n].args[0].name for n in views]
    assert len(sources) == len(set(sources)) == 2, views


def test_moving_is_kept_only_where_it_saves_launches(monkeypatch):
    with_sink = plan_mod.plan(capture(str(SINK)))
    monkeypatch.setattr(plan_mod, "sink_views", lambda g: g)
    without = plan_mod.plan(capture(str(SINK)))
    assert len(with_sink.kernels) + 4 == len(without.kernels)


def test_a_graph_with_nothing_to_move_is_returned_as_is():
    cap = capture(str(PROBLEMS / "softmax_unfused.py"))
    for g in cap.graphs.values():
        folded = fold_constants(g)
        assert sink_views(folded) is folded


def test_the_original_graph_is_not_modified():
    cap = capture(str(SINK))
    g = fold_constants(cap.graph)
    before = {n: (v.op, v.args, v.shape) for n, v in g.values.items()}
    moved = sink_views(g)
    assert moved is not g
    assert {n: (v.op, v.args, v.shape) for n, v in g.values.items()} == before
    # every reference in the moved graph names a value defined before it
    seen: set[str] = set()
    for name, v in moved.values.items():
        assert all(r in seen for r in v.refs()), name
        seen.add(name)
    assert all(o in seen for o in moved.outputs)


@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_the_moved_drafts_are_accepted(evaluator, tmp_path, language):
    source, _ = synthesize(str(SINK), language)
    path = tmp_path / f"sink_{language}.py"
    path.write_text(source)
    result = evaluate_short(evaluator, SINK, path)  # the verdict, not the figure
    assert result.accepted, result.reason
