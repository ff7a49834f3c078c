"""Problem loading (kernelevolve.problem): the examples, KernelBench-format files, every way a
problem file can be wrong, and problems whose reference only fails once it runs in a worker."""
from __future__ import annotations

import hashlib
import textwrap
import types

import pytest

from conftest import PROBLEMS, example
from kernelevolve.errors import ProblemError
from kernelevolve.problem import Case, CaseBinder, load_problem

# --------------------------------------------------------------------------- good problems

EXAMPLE_NAMES = ("pointwise_chain", "softmax", "rmsnorm")


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_problems_load(name):
    path = example(name)
    prob = load_problem(path)
    assert prob.name == name
    assert prob.path == str(path.resolve())
    assert prob.source_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert prob.tolerance is None
    assert len(prob.cases) == 3
    names = [c.name for c in prob.cases]
    assert len(set(names)) == 3
    assert any(n.startswith("tail") for n in names), names
    # The first case weighs double in every example; weights are floats.
    assert [c.weight for c in prob.cases] == [2.0, 1.0, 1.0]
    assert all(type(c.weight) is float for c in prob.cases)
    assert not any(c.held_out for c in prob.cases)
    # Every case rebinds size globals that exist in the module, with integer values.
    for case in prob.cases:
        assert case.bindings
        assert set(case.bindings) <= set(prob.size_globals)
        assert all(type(v) is int for v in case.bindings.values())
    assert prob.case(names[-1]) is prob.cases[-1]
    with pytest.raises(KeyError):
        prob.case("no-such-case")


def test_softmax_example_cases_exact():
    prob = load_problem(example("softmax"))
    assert [(c.name, c.weight, c.bindings) for c in prob.cases] == [
        ("512x2048", 2.0, {"BATCH": 512, "DIM": 2048}),
        ("128x8192", 1.0, {"BATCH": 128, "DIM": 8192}),
        ("tail_131x999", 1.0, {"BATCH": 131, "DIM": 999}),
    ]
    assert prob.size_globals == {"BATCH": 512, "DIM": 2048}


def test_kernelbench_level1_problem():
    prob = load_problem(PROBLEMS / "kb_level1_relu.py")
    assert prob.name == "kb_level1_relu"
    assert prob.cases == (Case(name="default", weight=1.0),)
    assert prob.cases[0].bindings == {}
    assert prob.size_globals == {"batch_size": 16, "dim": 16384}
    assert prob.tolerance is None


def test_kernelbench_level2_problem():
    prob = load_problem(PROBLEMS / "kb_level2_linear_swish_scale.py")
    assert prob.name == "kb_level2_linear_swish_scale"
    assert [c.name for c in prob.cases] == ["default"]
    assert prob.cases[0].weight == 1.0
    # Lowercase KernelBench size globals are found; the float divisor is not a size.
    assert prob.size_globals == {"batch_size": 128, "in_features": 256, "out_features": 512}
    assert prob.tolerance is None


def test_loading_does_not_leave_the_module_imported():
    import sys

    before = set(sys.modules)
    load_problem(example("softmax"))
    assert not [m for m in set(sys.modules) - before if m.startswith("ke_problem")]


# --------------------------------------------------------------------------- bad problems

GOOD_BODY = '''
import torch
import torch.nn as nn

DIM = 8
BATCH = 2


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
'''

# (file text, fragment the one-line message must contain)
BAD_PROBLEMS = {
    "syntax_error": ("import torch\ndef get_inputs(:\n    return []\n", "syntax error at line 2"),
    "raises_at_import": ("import torch\nraise RuntimeError('no dataset here')\n",
                         "importing it raised RuntimeError: no dataset here"),
    "no_model": (GOOD_BODY.replace("class Model(", "class Other("), "defines no `Model`"),
    "no_get_inputs": (GOOD_BODY.replace("def get_inputs(", "def make_inputs("),
                      "defines no `get_inputs`"),
    "no_get_init_inputs": (GOOD_BODY.replace("def get_init_inputs(", "def init_inputs("),
                           "defines no `get_init_inputs`"),
    "model_not_a_class": (GOOD_BODY + "\nModel = 3\n", "`Model` is not a class"),
    "get_inputs_not_callable": (GOOD_BODY + "\nget_inputs = [1]\n", "`get_inputs` is not callable"),
    "case_unknown_global": (GOOD_BODY + "\nCASES = [{'name': 'a', 'DIMS': 4}]\n",
                            "case 'a' sets DIMS, which is not a global"),
    "weight_zero": (GOOD_BODY + "\nCASES = [{'name': 'a', 'weight': 0, 'DIM': 4}]\n",
                    "case 'a' has weight 0"),
    "weight_negative": (GOOD_BODY + "\nCASES = [{'name': 'a', 'weight': -1.5, 'DIM': 4}]\n",
                        "case 'a' has weight -1.5"),
    "weight_nan": (GOOD_BODY + "\nCASES = [{'name': 'a', 'weight': float('nan')}]\n",
                   "case 'a' has weight nan"),
    "weight_string": (GOOD_BODY + "\nCASES = [{'name': 'a', 'weight': '2', 'DIM': 4}]\n",
                      "case 'a' has weight '2'"),
    "weight_bool": (GOOD_BODY + "\nCASES = [{'name': 'a', 'weight': True}]\n",
                    "case 'a' has weight True"),
    "cases_not_a_list": (GOOD_BODY + "\nCASES = {'name': 'a', 'DIM': 4}\n",
                         "CASES must be a non-empty list"),
    "cases_empty": (GOOD_BODY + "\nCASES = []\n", "CASES must be a non-empty list"),
    "case_not_a_dict": (GOOD_BODY + "\nCASES = [{'name': 'a'}, 'b']\n", "CASES[1] is a str"),
    "case_name_not_string": (GOOD_BODY + "\nCASES = [{'name': 7}]\n",
                             "CASES[0] has a name that is not a non-empty string"),
    "duplicate_case_names": (GOOD_BODY + "\nCASES = [{'name': 'a', 'DIM': 4}, "
                                         "{'name': 'a', 'DIM': 16}]\n",
                             "CASES[1] repeats the case name 'a'"),
    "tolerance_not_a_dict": (GOOD_BODY + "\nTOLERANCE = 1e-3\n", "TOLERANCE must be a dict"),
    "tolerance_unknown_key": (GOOD_BODY + "\nTOLERANCE = {'abs': 1e-3}\n",
                              "TOLERANCE must be a dict with keys atol and/or rtol"),
    "tolerance_empty": (GOOD_BODY + "\nTOLERANCE = {}\n", "TOLERANCE must be a dict"),
    "tolerance_negative": (GOOD_BODY + "\nTOLERANCE = {'atol': -1e-3}\n",
                           "TOLERANCE['atol'] must be a non-negative, finite number"),
    "tolerance_string": (GOOD_BODY + "\nTOLERANCE = {'rtol': '1e-3'}\n",
                         "TOLERANCE['rtol'] must be a non-negative, finite number"),
}


def _assert_one_line(exc: ProblemError, path, fragment: str) -> None:
    text = str(exc)
    assert "\n" not in text, text
    assert str(path) in text, text
    assert fragment in text, text
    assert exc.path == str(path)


@pytest.mark.parametrize("kind", sorted(BAD_PROBLEMS))
def test_bad_problem_is_one_line_problem_error(write, kind):
    text, fragment = BAD_PROBLEMS[kind]
    path = write(f"{kind}.py", text)
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    _assert_one_line(info.value, path, fragment)


def test_missing_problem_file(tmp_path):
    path = tmp_path / "nope" / "problem.py"
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    _assert_one_line(info.value, path, "no such file")


def test_problem_path_is_a_directory(tmp_path):
    with pytest.raises(ProblemError) as info:
        load_problem(tmp_path)
    _assert_one_line(info.value, tmp_path, "no such file")


def test_problem_error_survives_pickling(write):
    import pickle

    path = write("no_model.py", BAD_PROBLEMS["no_model"][0])
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    copy = pickle.loads(pickle.dumps(info.value))
    assert type(copy) is ProblemError
    assert (copy.path, copy.fault, str(copy)) == (info.value.path, info.value.fault,
                                                  str(info.value))


def test_multiline_import_error_is_still_one_line(write):
    path = write("multiline.py", "raise ValueError('first line\\nsecond line')\n")
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    _assert_one_line(info.value, path, "importing it raised ValueError: first line")


def test_problem_calling_sys_exit_at_import(write):
    path = write("exits.py", "import sys\nsys.exit(3)\n")
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    _assert_one_line(info.value, path, "SystemExit")


def test_nan_tolerance_rejected(write):
    path = write("nan_tol.py", GOOD_BODY + "\nTOLERANCE = {'atol': float('nan')}\n")
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    _assert_one_line(info.value, path, "TOLERANCE['atol']")


def test_infinite_weight_rejected(write):
    path = write("inf_weight.py", GOOD_BODY + "\nCASES = [{'name': 'a', 'weight': float('inf')},"
                                              " {'name': 'b', 'DIM': 16}]\n")
    with pytest.raises(ProblemError) as info:
        load_problem(path)
    _assert_one_line(info.value, path, "case 'a' has weight inf")


def test_tolerance_parsed(write):
    path = write("tol.py", GOOD_BODY + "\nTOLERANCE = {'atol': 1e-3, 'rtol': 0}\n")
    prob = load_problem(path)
    assert prob.tolerance == {"atol": 1e-3, "rtol": 0.0}
    assert all(type(v) is float for v in prob.tolerance.values())


def test_case_defaults(write):
    path = write("defaults.py", GOOD_BODY + "\nCASES = [{'DIM': 4}, {'name': 'big', 'DIM': 64}]\n")
    prob = load_problem(path)
    assert [(c.name, c.weight, c.bindings) for c in prob.cases] == [
        ("case0", 1.0, {"DIM": 4}), ("big", 1.0, {"DIM": 64})]


# --------------------------------------------------------------------------- CaseBinder

def test_case_binder_reverts_to_module_defaults():
    module = types.ModuleType("fake_problem")
    module.DIM, module.BATCH, module.OTHER = 4, 2, 99
    cases = (Case("wide", 1.0, {"DIM": 7}), Case("tall", 1.0, {"BATCH": 3}), Case("plain", 1.0))
    binder = CaseBinder(module, cases)
    binder.bind(cases[0])
    assert (module.DIM, module.BATCH) == (7, 2)
    binder.bind(cases[1])
    assert (module.DIM, module.BATCH) == (4, 3)  # DIM back to its default
    binder.bind(cases[0])
    assert (module.DIM, module.BATCH) == (7, 2)  # BATCH back to its default
    binder.bind(cases[2])
    assert (module.DIM, module.BATCH, module.OTHER) == (4, 2, 99)


def test_case_binder_on_a_loaded_problem(write):
    from kernelevolve.problem import import_module

    path = write("binder.py", GOOD_BODY + "\nCASES = [{'name': 'a', 'DIM': 5}, {'name': 'b'}]\n")
    prob = load_problem(path)
    module = import_module(path)
    binder = CaseBinder(module, prob.cases)
    binder.bind(prob.case("a"))
    assert tuple(module.get_inputs()[0].shape) == (2, 5)
    binder.bind(prob.case("b"))
    assert tuple(module.get_inputs()[0].shape) == (2, 8)


# --------------------------------------------------------------------------- faults found by running

IDENTITY_CANDIDATE = '''
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return x * 2
'''

RAISES_ON_SEVEN = GOOD_BODY.replace(
    "        return x * 2",
    "        if DIM == 7:\n"
    "            raise RuntimeError('reference cannot handle DIM=7')\n"
    "        return x * 2") + textwrap.dedent("""
    CASES = [
        {"name": "fine", "weight": 1.0, "DIM": 8},
        {"name": "seven", "weight": 1.0, "DIM": 7},
    ]
    """)


def test_reference_raising_on_one_case(evaluator, write):
    problem = write("raises_on_seven.py", RAISES_ON_SEVEN)
    candidate = write("cand.py", IDENTITY_CANDIDATE)
    load_problem(problem)  # loads fine: the fault only shows when the reference runs
    with pytest.raises(ProblemError) as info:
        evaluator.evaluate(problem, candidate)
    text = str(info.value)
    assert "\n" not in text
    assert str(problem) in text
    assert "'seven'" in text and "'fine'" not in text
    assert "reference cannot handle DIM=7" in text


@pytest.mark.parametrize("noise", [
    "float(int.from_bytes(os.urandom(2), 'little'))",
    "float(time.perf_counter_ns() % 100003)",
], ids=["urandom", "time"])
def test_nondeterministic_get_inputs(evaluator, write, noise):
    body = GOOD_BODY.replace("import torch\n", "import os\nimport time\nimport torch\n", 1)
    body = body.replace("return [torch.randn(BATCH, DIM)]",
                        f"return [torch.randn(BATCH, DIM) + {noise}]")
    problem = write("nondeterministic.py", body)
    candidate = write("cand.py", IDENTITY_CANDIDATE)
    with pytest.raises(ProblemError) as info:
        evaluator.evaluate(problem, candidate)
    text = str(info.value)
    assert "\n" not in text
    assert str(problem) in text
    assert "deterministic" in text


DOUBLE_CPP_CANDIDATE = r'''
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

_lib = load_cpp("""
#include <cstdint>
extern "C" void twice(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i];
}
""", name="test_problem_twice")
_lib.twice.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.twice.restype = None


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.twice(ptr(x), ptr(y), x.numel())
        return y
'''


def test_evaluator_usable_after_problem_errors(evaluator, write):
    """A well-formed tmp problem still evaluates, on the same pool, after the faults above."""
    problem = write("fine.py", GOOD_BODY + "\nCASES = [{'name': 'a', 'DIM': 8}, {'name': 'b', "
                                           "'DIM': 7}]\n")
    candidate = write("cand.py", DOUBLE_CPP_CANDIDATE)
    result = evaluator.evaluate(problem, candidate)
    assert result.accepted, result.reason
    assert result.language == "cpp"
    assert [c.name for c in result.cases if not c.held_out] == ["a", "b"]
    assert all(c.correct for c in result.cases)
    assert all(c.max_abs_err == 0.0 for c in result.cases)
