"""Numbers that differ between cases, read from the model at call time (synth/lift.py): a
scale and a shift derived from a constructor argument the cases set differently become 0-d
buffers the kernel reads, and the drafts are accepted in both languages; a difference no model
attribute explains is still refused with the trace's reason."""
from __future__ import annotations

import pytest

from conftest import PROBLEMS
from short_timing import evaluate_short
from kernelevolve.synth import explain_problem, synthesize
from kernelevolve.synth.capture import capture
from kernelevolve.synth.lift import lift_case_numbers

SCALE = PROBLEMS / "synth_case_scale.py"


def test_the_differing_numbers_become_buffers_of_the_model_attributes():
    cap = capture(str(SCALE))
    g = cap.graph
    assert g.lifted == {"_ke_attr_scale": "scale", "_ke_attr_shift": "shift"}
    lifted = [n for n, v in g.values.items() if v.op == "param" and n in g.lifted]
    assert sorted(lifted) == ["_ke_attr_scale", "_ke_attr_shift"]
    # every case's graph reads the buffers now, and no case's numbers remain in the graph
    for case in cap.graphs.values():
        numbers = [a for v in case.values.values() for a in v.args
                   if isinstance(a, float) and a not in (0.0, 1.0)]
        assert not numbers, numbers
    source, _ = synthesize(str(SCALE), "cpp")
    assert "self.register_buffer('_ke_attr_scale', torch.tensor(float(self.scale)" in source


def test_graphs_that_agree_are_left_as_they_are():
    cap = capture(str(PROBLEMS / "softmax_unfused.py"))
    assert lift_case_numbers(cap.graphs) is cap.graphs


def test_a_difference_no_attribute_explains_is_still_refused(write):
    # x * x.size(-1) is read at call time now (lift_sizes.py); a square is not
    path = write("size_as_value.py", """
import torch
import torch.nn as nn
N = 16
CASES = [{"name": "a", "weight": 1.0}, {"name": "b", "weight": 1.0, "N": 24}]
class Model(nn.Module):
    def forward(self, x):
        return x * (x.size(-1) ** 2 + 1)
def get_inputs():
    return [torch.randn(4, N)]
def get_init_inputs():
    return []
""")
    assert "traces to a different graph" in explain_problem(str(path))


@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_lifted_drafts_are_accepted(evaluator, tmp_path, language):
    source, _ = synthesize(str(SCALE), language)
    path = tmp_path / f"lift_{language}.py"
    path.write_text(source)
    result = evaluate_short(evaluator, SCALE, path)  # the verdict, not the figure
    assert result.accepted, result.reason
