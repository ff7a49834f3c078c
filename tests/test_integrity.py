"""Integrity verdicts: unit tests of the driver-side rules, and the policy switches end to end."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from conftest import CORPUS, PROBLEMS, example
from kernelevolve.harness.gates.integrity import (IntegrityPolicy, fallback_problem, launch_problem,
                                            neutered_problem, norm_ratio_problem, timing_problem)
from kernelevolve.problem import derive_held_out, load_problem

# Where a test's subject is one gate's verdict or a log, not a figure: one case of softmax (its
# smallest) takes the candidate through every gate at a third of the work of all its cases.
ONE_CASE = ("tail_131x999",)


def test_norm_ratio_flags_zeros_that_pass_a_loose_tolerance():
    ref = [torch.full((4, 16384), 1.0 / 16384)]
    assert torch.allclose(torch.zeros_like(ref[0]), ref[0], atol=1e-4, rtol=1e-4)
    assert "norm" in norm_ratio_problem(ref, [torch.zeros_like(ref[0])])
    assert norm_ratio_problem(ref, [ref[0] * (1 + 1e-6)]) is None
    assert norm_ratio_problem([torch.zeros(3)], [torch.zeros(3)]) is None  # all-zero reference
    assert norm_ratio_problem([torch.arange(3)], [torch.arange(3)]) is None  # integers: exact


def test_launch_rule_and_its_escape_hatch():
    counts = [{"cpp": 1, "triton": 0}, {"cpp": 0, "triton": 0}]
    assert "no custom kernel" in launch_problem("c", counts, IntegrityPolicy())
    assert launch_problem("c", counts, IntegrityPolicy(allow_no_kernel=True)) is None
    assert launch_problem("c", [{"triton": 2}], IntegrityPolicy()) is None


def test_fallback_rule_default_and_strict():
    ref_ops = ["add", "mean", "mul", "pow", "rsqrt"]
    assert "fallback" in fallback_problem("c", ref_ops, ref_ops + ["exp"], IntegrityPolicy())
    assert fallback_problem("c", ref_ops, ["mean", "pow"], IntegrityPolicy()) is None
    assert "--strict" in fallback_problem("c", ref_ops, ["mean"], IntegrityPolicy(strict=True))
    assert fallback_problem("c", ref_ops, [], IntegrityPolicy(strict=True)) is None


def test_neutered_rule():
    ref = [torch.randn(5, 7)]
    assert "skipped" in neutered_problem("c", ref, {"outputs": [ref[0].clone()]}, None)
    assert neutered_problem("c", ref, {"outputs": [torch.zeros(5, 7)]}, None) is None
    assert neutered_problem("c", ref, {"error": "forward raised"}, None) is None


def test_timing_rule_catches_samples_that_do_not_fit_the_clock():
    data = {"ref_ms": [10.0] * 10, "cand_ms": [1.0] * 10, "loop_s": 0.2}
    assert timing_problem("c", data, wall_s=1.0) is None
    assert "patched clock" in timing_problem("c", {**data, "loop_s": 0.05}, wall_s=1.0)
    assert "wall clock" in timing_problem("c", data, wall_s=0.1)


def test_held_out_case_is_derived_only_when_no_odd_case_exists():
    kb = load_problem(PROBLEMS / "kb_level1_relu.py")
    held = derive_held_out(kb)
    assert held is not None and held.held_out and held.weight == 0.0
    assert held.bindings == {"batch_size": 15, "dim": 16383}
    assert derive_held_out(load_problem(example("softmax"))) is None  # has tail_131x999


def test_held_out_case_runs_and_is_reported(evaluator):
    result = evaluator.evaluate(PROBLEMS / "kb_level1_relu.py", PROBLEMS / "kb_level1_relu_cpp.py")
    assert result.accepted, result.reason
    held = [c for c in result.cases if c.held_out]
    assert [c.name for c in held] == ["held_out_odd"] and held[0].correct
    assert held[0].speedup is None  # checked, never timed or weighted


def test_partial_replacement_is_accepted_and_strict_rejects_it(evaluator):
    problem = PROBLEMS / "kb_level2_linear_swish_scale.py"
    cand = PROBLEMS / "kb_level2_linear_swish_scale_cpp.py"
    result = evaluator.evaluate(problem, cand)
    assert result.accepted, result.reason
    assert set(result.integrity["candidate_ops"]["default"]) < set(
        result.integrity["reference_ops"]["default"])
    strict = replace(evaluator.options, integrity=IntegrityPolicy(strict=True))
    result = evaluator.evaluate(problem, cand, options=strict)
    assert result.stage == "integrity" and "--strict" in result.reason


def test_allow_no_kernel_accepts_a_pure_torch_candidate(evaluator, write):
    cand = write("torch_only.py", "import torch\nimport torch.nn as nn\n\n\n"
                 "class ModelNew(nn.Module):\n    def forward(self, x):\n"
                 "        m = x.amax(dim=-1, keepdim=True)\n        e = (x - m).exp()\n"
                 "        return e / e.sum(dim=-1, keepdim=True)\n")
    one_case = replace(evaluator.options, only_cases=ONE_CASE)
    result = evaluator.evaluate(example("softmax"), cand, options=one_case)
    assert result.stage == "integrity" and "no custom kernel" in result.reason
    opts = replace(one_case, integrity=IntegrityPolicy(allow_no_kernel=True))
    result = evaluator.evaluate(example("softmax"), cand, options=opts)
    assert result.accepted, result.reason


def test_large_speedups_are_measured_twice(evaluator):
    opts = replace(evaluator.options, integrity=IntegrityPolicy(recheck_speedup=0.0),
                   only_cases=ONE_CASE)
    result = evaluator.evaluate(example("softmax"), CORPUS / "good_softmax_cpp.py", options=opts)
    # accepted at any speed (a loaded machine can put it under 1x); a gate's reject is a bug
    assert result.accepted, result.reason
    recheck = result.integrity["recheck"]
    assert recheck["first"] > 0 and recheck["second"] > 0
    assert result.speedup == pytest.approx(min(recheck["first"], recheck["second"]), rel=1e-9)


def test_integrity_facts_are_reported(evaluator):
    result = evaluator.evaluate(example("rmsnorm"), example("rmsnorm").parent / "candidate_cpp.py",
                                options=replace(evaluator.options, only_cases=("tail_63x1537",)))
    assert result.accepted, result.reason
    launches = result.integrity["launches"]
    assert all(sum(c.values()) >= 1 for per_case in launches.values() for c in per_case)
    assert result.integrity["reference_ops"]["tail_63x1537"] == ["add", "mean", "mul", "pow", "rsqrt"]


def test_what_a_candidate_prints_is_kept_as_its_log(evaluator, write):
    source = (CORPUS / "good_softmax_cpp.py").read_text().replace(
        "    def forward(self, x):\n", "    def forward(self, x):\n        print('hello from forward')\n")
    cand = write("chatty.py", source)
    result = evaluator.evaluate(example("softmax"), cand,
                                options=replace(evaluator.options, only_cases=ONE_CASE))
    assert result.accepted, result.reason
    assert "hello from forward" in result.logs["check.stdout"]
    assert [p.rsplit("/", 1)[-1].split("-")[0] for p in result.libraries] == ["corpus_softmax"]


def test_neutered_check_needs_a_reference_output_a_skipped_kernel_could_miss():
    """The aten suite's any_all (a lone True) and its losses on NaN inputs (a NaN scalar) were
    rejected as fake: uninitialised memory and NaN poison match such outputs by chance. Those
    cases say nothing; a case with a finite value still convicts a kernel torch stands in for."""
    import torch

    from kernelevolve.harness.gates.integrity import neutered_problem

    nan, inf = torch.tensor(float("nan")), torch.tensor([float("inf"), -float("inf")])
    assert neutered_problem("edge", [nan], {"outputs": [nan.clone()]}, None) is None
    assert neutered_problem("edge", [inf], {"outputs": [inf.clone()]}, None) is None
    lone = torch.tensor(True)
    assert neutered_problem("normal", [lone], {"outputs": [lone.clone()]}, None) is None
    finite = torch.tensor([0.5, float("nan")])
    assert "a fake kernel" in neutered_problem("normal", [finite], {"outputs": [finite.clone()]},
                                               None)
    bools = torch.tensor([True, False, True])
    assert "a fake kernel" in neutered_problem("normal", [nan, bools],
                                               {"outputs": [nan.clone(), bools.clone()]}, None)


def test_neutered_check_ignores_an_all_zero_reference_output():
    """The aten suite's argmin_all under the Triton interpreter was rejected as fake on its edge
    case: a NaN comes first, so the answer is index 0, which a zero-filled output buffer holds
    without any kernel. Zeros say nothing; any nonzero value still convicts."""
    import torch

    from kernelevolve.harness.gates.integrity import neutered_problem

    index0 = torch.tensor(0)
    assert neutered_problem("edge", [index0], {"outputs": [torch.zeros((), dtype=torch.int64)]},
                            None) is None
    zeros = torch.zeros(4, 3)
    assert neutered_problem("edge", [zeros], {"outputs": [zeros.clone()]}, None) is None
    index5 = torch.tensor(5)
    assert "a fake kernel" in neutered_problem("normal", [index5], {"outputs": [index5.clone()]},
                                               None)
    mostly_zero = torch.tensor([0.0, 0.0, 2.0])
    assert "a fake kernel" in neutered_problem("normal", [mostly_zero],
                                               {"outputs": [mostly_zero.clone()]}, None)
