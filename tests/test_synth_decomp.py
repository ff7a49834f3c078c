"""The synthesizer's own decompositions (synth/decomp.py): multi-dim and full reductions,
vector norms, max/min over a dim, batch / group / instance norm in inference, var_mean, drafted
and accepted by the full harness, NaN and inf edges included."""
from __future__ import annotations

import pytest

from conftest import PROBLEMS
from short_timing import evaluate_short
from kernelevolve.synth import explain_problem, synthesize
from kernelevolve.synth.shapes import call_shape, evaluate

REDUCE = PROBLEMS / "synth_decomp_reduce.py"
NORMS = PROBLEMS / "synth_decomp_norms.py"


def _accepted(evaluator, problem, source, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    result = evaluate_short(evaluator, problem, path)  # the verdict, not the figure
    assert result.accepted, result.reason
    return result


@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_reductions_and_norms_over_merged_dims_are_accepted(evaluator, tmp_path, language):
    source, p = synthesize(str(REDUCE), language)
    ops = [n.source_op for k in p.kernels for n in k.nodes]
    assert {"amax", "amin", "sum", "mean", "sqrt", "abs"} <= set(ops)
    _accepted(evaluator, REDUCE, source, tmp_path, f"decomp_reduce_{language}")


@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_batch_group_and_instance_norm_in_inference_are_accepted(evaluator, tmp_path, language):
    text = explain_problem(str(NORMS))
    assert "native_batch_norm" not in text and "native_group_norm" not in text, text
    source, p = synthesize(str(NORMS), language)
    assert len(p.kernels) == 4        # bn; group norm's statistics and affine; instance norm
    _accepted(evaluator, NORMS, source, tmp_path, f"decomp_norms_{language}")


@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_var_mean_gives_torchs_welford_mean_at_infs(evaluator, tmp_path, language):
    """var_mean's mean is NaN where an inf is followed by another element, the inf where it
    comes last (torch.mean gives inf for both): over the last dim, a block of dims, dim 0."""
    problem = PROBLEMS / "synth_var_mean.py"
    source, p = synthesize(str(problem), language)
    assert not any(p.graph.values[n].op in ("var_mean", "std_mean") for n in p.kept)
    assert sum(r.op == "var" for k in p.kernels for r in k.reductions) == 3
    _accepted(evaluator, problem, source, tmp_path, f"var_mean_{language}")


def test_a_p_norm_is_a_sum_of_powers(evaluator, write, tmp_path):
    # C++ only: the Triton emitter has no general pow yet
    path = write("p3.py", "import torch\nimport torch.nn as nn\n"
                 "class Model(nn.Module):\n"
                 "    def __init__(self):\n"
                 "        super().__init__()\n"
                 "    def forward(self, x):\n"
                 "        return torch.linalg.vector_norm(x, 3, dim=-1)\n"
                 "def get_inputs():\n    return [torch.randn(64, 96)]\n"
                 "def get_init_inputs():\n    return []\n")
    assert "fuses abs, pow, sum, pow" in explain_problem(str(path))
    source, _ = synthesize(str(path), "cpp")
    _accepted(evaluator, path, source, tmp_path, "p3_cand")


def test_what_the_decompositions_leave_alone(write):
    path = write("left.py", "import torch\nimport torch.nn as nn\n"
                 "class Model(nn.Module):\n"
                 "    def __init__(self):\n"
                 "        super().__init__()\n"
                 "        self.bn = nn.BatchNorm1d(8)\n"
                 "    def forward(self, x):\n"
                 "        return x.var(dim=(0, 2)) * 2.0, torch.relu(self.bn(x))\n"
                 "def get_inputs():\n    return [torch.randn(4, 8, 16)]\n"
                 "def get_init_inputs():\n    return []\n")
    text = explain_problem(str(path))
    # a variance over dims (0, 2), not one block, does not compose from one-dim variances (a
    # sum does: decomp_blocks.py); training batch norm is covered (decomp_norms.py)
    assert "torch: var" in text and "native_batch_norm" not in text, text


def test_a_view_back_reads_its_sizes_from_a_forward_input():
    # (N, G, D) viewed back as the input's (N, C, H, W) in two cases
    ins = [(4, 2, 576), (3, 2, 324)]
    outs = [(4, 8, 12, 12), (3, 8, 9, 9)]
    others = {"x": [(4, 8, 12, 12), (3, 8, 9, 9)]}
    expr = call_shape(ins, outs, others)
    assert expr is not None and ("of", "x", 2, 3) in expr
    assert evaluate(expr, (5, 2, 1800), {"x": (5, 8, 15, 15)}) == (5, 8, 15, 15)
    assert call_shape(ins, outs) is None   # not from the source alone
