"""The trusted comparison (harness/gates/compare.py): every way an output can differ, and the tolerances."""
from __future__ import annotations

import math

import pytest
import torch

from kernelevolve.harness.gates.compare import DEFAULT_TOLERANCE, compare_outputs, tolerance_for


def cmp(ref, cand, tolerance=None):
    return compare_outputs(list(ref), list(cand), tolerance)


def test_identical_outputs_pass_with_zero_error():
    x = torch.randn(4, 5)
    out = cmp([x], [x.clone()])
    assert out.ok and out.reason == "" and out.mismatch is None
    assert (out.max_abs_err, out.max_rel_err) == (0.0, 0.0)


def test_output_count_mismatch():
    x = torch.ones(3)
    out = cmp([x], [x, x])
    assert not out.ok
    assert out.reason == "forward returned 2 output(s); the reference returns 1"
    out = cmp([x, x], [])
    assert out.reason == "forward returned 0 output(s); the reference returns 2"


def test_shape_mismatch():
    out = cmp([torch.zeros(2, 3)], [torch.zeros(3, 2)])
    assert not out.ok
    assert out.reason == "output has shape (3, 2); expected (2, 3)"


def test_dtype_mismatch():
    out = cmp([torch.zeros(4)], [torch.zeros(4, dtype=torch.float64)])
    assert not out.ok
    assert out.reason == "output has dtype float64; expected float32"


def test_labels_name_the_output_among_several():
    a, b = torch.zeros(2), torch.zeros(2)
    out = cmp([a, b], [a, torch.zeros(3)])
    assert out.reason == "output 1 has shape (3,); expected (2,)"


@pytest.mark.slow
def test_nan_positions_must_match():
    ref = torch.tensor([1.0, float("nan"), 3.0])
    assert cmp([ref], [ref.clone()]).ok  # NaN where the reference has NaN is right
    moved = torch.tensor([float("nan"), 2.0, 3.0])
    out = cmp([ref], [moved])
    assert not out.ok
    assert "NaN positions differ (1 unexpected NaN, 1 missing)" in out.reason
    assert out.mismatch == "first mismatch at [0]: expected 1, got nan"
    assert math.isnan(out.max_abs_err)
    extra = cmp([torch.ones(2, 2)], [torch.tensor([[1.0, 1.0], [float("nan"), 1.0]])])
    assert "(1 unexpected NaN, 0 missing)" in extra.reason
    assert extra.mismatch == "first mismatch at [1, 0]: expected 1, got nan"


def test_inf_positions_and_signs_must_match():
    ref = torch.tensor([1.0, float("inf"), -float("inf")])
    assert cmp([ref], [ref.clone()]).ok
    flipped = torch.tensor([1.0, -float("inf"), -float("inf")])
    out = cmp([ref], [flipped])
    assert not out.ok
    assert "inf positions or signs differ" in out.reason
    assert out.mismatch == "first mismatch at [1]: expected inf, got -inf"
    finite = torch.tensor([1.0, 3e38, -float("inf")])
    out = cmp([ref], [finite])
    assert not out.ok and "inf positions or signs differ" in out.reason
    assert out.mismatch == "first mismatch at [1]: expected inf, got 3e+38"


def test_fp32_default_tolerance_boundaries():
    assert tolerance_for(torch.float32, None) == (1e-4, 1e-4)
    ref = torch.tensor([0.0, 1.0, 100.0])
    # allowed error: 1e-4 + 1e-4 * |ref| = 1e-4, 2e-4, 1.01e-2
    inside = ref + torch.tensor([0.9e-4, 1.9e-4, 1.0e-2])
    out = cmp([ref], [inside])
    assert out.ok, out.reason
    assert out.max_abs_err == pytest.approx(1.0e-2, rel=1e-3)
    # Relative to the output's scale (its largest |ref|, 100), not to the exact zero at [0].
    assert out.max_rel_err == pytest.approx(1.0e-4, rel=1e-3)
    for i, over in enumerate([1.2e-4, 2.2e-4, 1.03e-2]):
        cand = inside.clone()
        cand[i] = ref[i] + over
        out = cmp([ref], [cand])
        assert not out.ok, (i, over)
        assert "allowed atol=0.0001 rtol=0.0001" in out.reason
        assert f"first mismatch at [{i}]" in out.reason


def test_tolerance_bound_is_inclusive():
    # Exactly representable values: error 0.5 against a bound of exactly 0.5 passes.
    ref = torch.zeros(3)
    tol = {"atol": 0.5, "rtol": 0.0}
    assert cmp([ref], [torch.tensor([0.5, -0.5, 0.25])], tol).ok
    out = cmp([ref], [torch.tensor([0.5, 0.50000006, 0.0])], tol)
    assert not out.ok
    assert out.mismatch.startswith("first mismatch at [1]: expected 0, got 0.5")


def test_fp16_and_bf16_default_tolerance():
    assert tolerance_for(torch.float16, None) == (1e-2, 1e-2)
    assert tolerance_for(torch.bfloat16, None) == (1e-2, 1e-2)
    ref = torch.ones(2, dtype=torch.float16)
    # allowed error at 1.0: 2e-2
    assert cmp([ref], [torch.tensor([1.0, 1.015625], dtype=torch.float16)]).ok
    out = cmp([ref], [torch.tensor([1.0, 1.03125], dtype=torch.float16)])
    assert not out.ok
    assert "allowed atol=0.01 rtol=0.01" in out.reason
    assert out.mismatch == "first mismatch at [1]: expected 1, got 1.03125"
    bref = torch.ones(2, dtype=torch.bfloat16)
    assert cmp([bref], [torch.tensor([1.0, 1.0078125], dtype=torch.bfloat16)]).ok
    assert not cmp([bref], [torch.tensor([1.0, 1.03125], dtype=torch.bfloat16)]).ok


def test_float64_is_tighter_than_float32():
    ref64 = torch.ones(1, dtype=torch.float64)
    assert not cmp([ref64], [ref64 + 1e-5]).ok
    assert cmp([ref64.float()], [(ref64 + 1e-5).float()]).ok


def test_integer_outputs_compare_exactly():
    ref = torch.tensor([[1, 2, 3], [4, 5, 6]])
    assert cmp([ref], [ref.clone()]).ok
    cand = ref.clone()
    cand[1, 2] = 7
    out = cmp([ref], [cand], {"atol": 10.0, "rtol": 10.0})  # tolerance never applies to ints
    assert not out.ok
    assert out.reason.startswith("output differs from the reference in 1 of 6 elements "
                                 "(exact match required for int64 outputs")
    assert out.mismatch == "first mismatch at [1, 2]: expected 6, got 7"
    assert tolerance_for(torch.int32, {"atol": 1.0}) == (0.0, 0.0)


def test_bool_outputs_compare_exactly():
    ref = torch.tensor([True, False, True])
    assert cmp([ref], [ref.clone()]).ok
    out = cmp([ref], [torch.tensor([True, True, True])])
    assert not out.ok
    assert "exact match required for bool outputs" in out.reason
    assert out.mismatch == "first mismatch at [1]: expected False, got True"


def test_tolerance_override():
    ref = torch.ones(4)
    cand = ref + 5e-3
    assert not cmp([ref], [cand]).ok
    assert cmp([ref], [cand], {"atol": 1e-2}).ok
    assert cmp([ref], [cand], {"rtol": 1e-2}).ok
    # A partial override keeps the dtype's default for the other bound.
    assert tolerance_for(torch.float32, {"atol": 0.5}) == (0.5, 1e-4)
    assert tolerance_for(torch.float16, {"rtol": 0.0}) == (1e-2, 0.0)
    out = cmp([ref], [cand], {"atol": 1e-3, "rtol": 1e-3})
    assert not out.ok and "allowed atol=0.001 rtol=0.001" in out.reason


def test_first_mismatch_text_and_counts():
    ref = torch.zeros(3, 4)
    cand = ref.clone()
    cand[1, 3] = 1.0
    cand[2, 0] = -2.0
    out = cmp([ref], [cand])
    assert not out.ok
    assert out.reason == ("output differs from the reference in 2 of 12 elements (allowed "
                          "atol=0.0001 rtol=0.0001, the worst element is 2e+04x its allowance; "
                          "max abs err 2, max rel err 2e+04 of the output's largest |value|); "
                          "first mismatch at [1, 3]: expected 0, got 1")
    assert out.mismatch == "first mismatch at [1, 3]: expected 0, got 1"
    assert out.max_abs_err == 2.0


def test_zero_dim_and_empty_outputs():
    assert cmp([torch.tensor(1.5)], [torch.tensor(1.5)]).ok
    out = cmp([torch.tensor(1.5)], [torch.tensor(2.5)])
    assert not out.ok
    assert out.mismatch == "first mismatch at []: expected 1.5, got 2.5"
    assert cmp([torch.zeros(0, 3)], [torch.zeros(0, 3)]).ok
    assert not cmp([torch.zeros(0, 3)], [torch.zeros(3, 0)]).ok


def test_errors_are_reported_in_float64():
    # 1 ulp above 1.0 in float32 is an error of exactly 2**-23, reported without rounding.
    ref = torch.ones(1)
    cand = torch.tensor([1.0 + 2 ** -23])
    out = cmp([ref], [cand])
    assert out.ok
    assert out.max_abs_err == 2 ** -23
    assert out.max_rel_err == 2 ** -23


def test_default_tolerance_table():
    assert set(DEFAULT_TOLERANCE) >= {"float64", "float32", "float16", "bfloat16"}
    assert tolerance_for(torch.int64, None) == (0.0, 0.0)
    assert tolerance_for(torch.bool, None) == (0.0, 0.0)


def test_a_correct_output_on_a_reference_near_zero_reports_a_small_relative_error():
    """A sine through zero, computed in another order: correct, and its relative error is small
    (an elementwise |cand - ref| / |ref| read 7.8e+04 for such a candidate)."""
    x = torch.linspace(-3.0, 3.0, 4097, dtype=torch.float64)  # crosses 0 within 1e-16
    ref = torch.sin(x).float()
    cand = (torch.sin(x) + 3e-7 * torch.cos(7 * x)).float()
    assert float((cand.double() - ref.double()).abs().div(ref.double().abs()).max()) > 1e3
    out = cmp([ref], [cand])
    assert out.ok, out.reason
    assert 0 < out.max_rel_err < 1e-5
    assert out.max_rel_err == pytest.approx(out.max_abs_err / float(ref.abs().max()))


def test_the_relative_error_of_an_all_zero_reference_is_finite():
    ref = torch.zeros(8)
    out = cmp([ref], [ref + 1e-6])
    assert out.ok and out.max_rel_err == pytest.approx(1e-6 / 1e-4)  # scale floored at atol
    assert cmp([ref], [ref.clone()]).max_rel_err == 0.0


NEAR_ZERO_PROBLEM = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.sin(x)


def get_inputs():
    return [torch.linspace(-3.0, 3.0, 4097).reshape(17, 241)]  # crosses zero


def get_init_inputs():
    return []
'''

# sin(x) as cos(x - pi/2) in float32: correct to about one ulp of pi/2 (1e-7) everywhere, so
# where sin(x) is near zero (exactly zero at x = 0) |cand - ref| / |ref| is huge.
NEAR_ZERO_CANDIDATE = '''
import math
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.cos(x - math.pi / 2)
'''


@pytest.mark.slow
def test_a_correct_candidate_on_a_near_zero_reference_reports_a_small_relative_error(
        evaluator, write):
    """Through the real harness and the agent's `check` text: the figure a model reads."""
    from dataclasses import replace

    from kernelevolve.operators.agent_tools import check_text

    opts = replace(evaluator.options, stop_after="integrity")
    result = evaluator.evaluate(write("near_zero.py", NEAR_ZERO_PROBLEM),
                                write("cand.py", NEAR_ZERO_CANDIDATE), options=opts)
    assert result.stage != "correctness", result.reason
    (case,) = result.cases
    assert case.correct and case.max_abs_err > 0, result.reason
    assert case.max_rel_err < 1e-5  # elementwise against |ref| (clamped to 1e-12): ~4e+04
    text = check_text(result.to_dict(), case.name)
    assert f"max rel err {case.max_rel_err:.4g} (of the output's largest |value|)" in text
