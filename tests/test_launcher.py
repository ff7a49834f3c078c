"""The trusted kernel launcher (runtime/launch.py + launch_ext.cpp): argument checks in both its
paths (the C extension and the ctypes fallback), launch accounting, the index flag, synthesized
drafts through it, and a harness job that loads the driver's build of it."""
from __future__ import annotations

import ctypes

import pytest
import torch

from conftest import PROBLEMS
from kernelevolve.errors import CppCompileError
from kernelevolve.runtime import (elementwise_launcher, kernel_launcher, launch, launch_build,
                                  launches, load_cpp)
from kernelevolve.runtime.launch_fallback import CtypesElementwise, CtypesLauncher

SRC = r"""
#include <cstdint>
#include <cstdlib>
extern "C" void* scratch(int64_t n) { return std::malloc(n); }  // libc: a dependency of lib
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}
extern "C" void take(const float* t, const int64_t* idx, float* y, int64_t n, int64_t rows,
                     int32_t* bad) {
    for (int64_t i = 0; i < n; ++i) {
        const int64_t j = idx[i];
        if (j < 0 || j >= rows) { *bad = 1; y[i] = 0.0f; continue; }
        y[i] = t[j];
    }
}
extern "C" void split(const float* x, const float* b, float* y, uint8_t* neg, int64_t n) {
    for (int64_t i = 0; i < n; ++i) { y[i] = x[i] + b[0]; neg[i] = x[i] < 0.0f; }
}
"""
F32, I64 = torch.float32, torch.int64


@pytest.fixture(scope="module")
def lib():
    return load_cpp(SRC, name="launcher_test")


@pytest.fixture(params=["c", "ctypes"])
def relu(request, lib):
    if request.param == "c":
        assert launch.available()[0], launch.available()[1]
        k = kernel_launcher(lib, "relu", (F32, F32), ints=1)
        assert "(ctypes)" not in repr(k)
        return k
    return CtypesLauncher(lib, "relu", (F32, F32), 1, False)


def test_relu_matches_torch_on_edges(relu):
    x = torch.tensor([float("nan"), -float("inf"), -0.0, 0.0, -1e-45, 3.5, float("inf")])
    y = torch.empty_like(x)
    relu(x, y, x.numel())
    torch.testing.assert_close(y, torch.relu(x), equal_nan=True)
    assert torch.equal(torch.signbit(y), torch.signbit(torch.relu(x)))


X = torch.randn(8)
BAD_CALLS = [
    ("count", lambda y: (X, y), TypeError, "takes 1 tensor(s)"[:0] + "then 1 int(s) (3 arguments), got 2"),
    ("not-a-tensor", lambda y: (X.tolist(), y, 8), TypeError, "argument 1 must be a torch.Tensor, not list"),
    ("dtype", lambda y: (X.double(), y, 8), TypeError, "argument 1 must be a torch.float32 tensor, got torch.float64"),
    ("out-dtype", lambda y: (X, y.half(), 8), TypeError, "argument 2 must be a torch.float32 tensor"),
    ("strided", lambda y: (torch.randn(16)[::2], y, 8), ValueError, "argument 1 is not contiguous"),
    ("expanded", lambda y: (torch.randn(1).expand(8), y, 8), ValueError, "argument 1 is not contiguous"),
    ("meta-device", lambda y: (torch.empty(8, device="meta"), y, 8), ValueError, "must be a CPU tensor, got one on meta"),
    ("float-size", lambda y: (X, y, 8.0), TypeError, "argument 3 must be an int, not float"),
    ("huge-size", lambda y: (X, y, 1 << 64), OverflowError, "argument 3 does not fit in int64"),
]


@pytest.mark.parametrize("make,exc,words", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_wrong_call_is_an_exception_not_a_crash(relu, make, exc, words):
    y = torch.full((8,), 7.0)
    launches.reset_launch_counts()
    with pytest.raises(exc, match="kernel relu"):
        try:
            relu(*make(y))
        except exc as e:
            assert words in str(e), str(e)
            raise
    assert torch.equal(y, torch.full((8,), 7.0)) and launches.total() == 0  # nothing ran


def test_c_launcher_takes_no_keywords_and_cannot_be_made_from_its_type(lib):
    k = kernel_launcher(lib, "relu", (F32, F32), ints=1)
    with pytest.raises(TypeError, match="positional arguments only"):
        k(X, X.clone(), n=8)
    with pytest.raises(TypeError):
        type(k)(0, lib, "relu", (F32, F32), 1, False)


@pytest.mark.parametrize("args,exc,words", [
    ((ctypes.CDLL(None), "relu", (F32, F32)), TypeError, "a library returned by load_cpp"),
    (("lib", "no_such_kernel", (F32,)), AttributeError, "exports no function 'no_such_kernel'"),
    (("lib", "relu; x", (F32,)), ValueError, "is not a kernel name"),
    (("lib", "malloc", (F32,)), AttributeError, "not a function the library itself defines"),
    (("lib", "relu", ("float32",)), TypeError, "must be torch dtypes"),
], ids=["not-load-cpp", "unknown-name", "bad-name", "libc-through-lib", "dtype-names"])
def test_factory_refuses_what_it_cannot_launch(lib, args, exc, words):
    args = tuple(lib if a == "lib" else a for a in args)
    with pytest.raises(exc, match=words):
        kernel_launcher(*args, ints=1)
    with pytest.raises(ValueError, match="ints must be a count"):
        kernel_launcher(lib, "relu", (F32, F32), ints=-1)


def test_launches_counted_and_suppressed(relu):
    x, y = torch.randn(64), torch.zeros(64)
    launches.reset_launch_counts()
    for _ in range(3):
        relu(x, y, 64)
    assert launches.launch_counts()["cpp"] == 3
    y.zero_()
    with launches.suppress_launches():
        relu(x, y, 64)
    assert launches.launch_counts()["cpp"] == 4 and not y.any()  # counted, not run
    relu(x, y, 64)
    assert torch.equal(y, torch.relu(x))
    launches.reset_launch_counts()
    assert launches.total() == 0


@pytest.mark.parametrize("path", ["c", "ctypes"])
def test_index_flag_raises_index_error_and_resets(lib, path):
    take = (kernel_launcher(lib, "take", (F32, I64, F32), ints=2, index_flag=True) if path == "c"
            else CtypesLauncher(lib, "take", (F32, I64, F32), 2, True))
    table, y = torch.arange(4.0), torch.empty(3)
    take(table, torch.tensor([3, 0, 1]), y, 3, 4)
    assert y.tolist() == [3.0, 0.0, 1.0]
    with pytest.raises(IndexError, match="index out of range in self"):
        take(table, torch.tensor([0, 4, 1]), y, 3, 4)
    take(table, torch.tensor([2, 2, 2]), y, 3, 4)  # the flag is the call's own
    assert y.tolist() == [2.0, 2.0, 2.0]


@pytest.mark.parametrize("path", ["c", "ctypes"])
def test_elementwise_launcher_does_the_whole_glue(lib, path):
    """Inputs made contiguous, outputs fresh and like the domain (their own dtypes), nothing
    launched for an empty domain; checks as kernel_launcher's."""
    ins, outs = (F32, F32), (F32, torch.bool)
    split = (elementwise_launcher(lib, "split", ins, outs, domain=0) if path == "c"
             else CtypesElementwise(lib, "split", ins, outs, 0))
    x, b = torch.randn(6, 5).t(), torch.tensor([0.5])
    launches.reset_launch_counts()
    y, neg = split(x, b)
    assert torch.equal(y, x + 0.5) and torch.equal(neg, x < 0) and y.is_contiguous()
    y2, _ = split(x, b)
    assert y2.data_ptr() != y.data_ptr()  # a fresh output every call
    e, en = split(torch.empty(0, 5), b)
    assert e.shape == en.shape == (0, 5) and en.dtype == torch.bool
    assert launches.launch_counts()["cpp"] == 2
    with pytest.raises(TypeError, match="takes 2 input tensor"):
        split(x)
    with pytest.raises(TypeError, match="argument 2 must be a torch.float32 tensor"):
        split(x, b.double())
    with pytest.raises(ValueError, match="domain must index an input"):
        elementwise_launcher(lib, "split", ins, outs, domain=2)


def test_without_python_headers_falls_back_and_says_so_once(lib, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(launch_build, "python_include", lambda: tmp_path)
    with pytest.raises(CppCompileError, match="no Python headers"):
        launch_build.build(tmp_path / "cache")
    monkeypatch.setattr(launch, "_state", {"module": None, "reason": None, "prebuilt": False,
                                           "spec": None})
    a = kernel_launcher(lib, "relu", (F32, F32), ints=1)
    b = kernel_launcher(lib, "relu", (F32, F32), ints=1)
    assert isinstance(a, CtypesLauncher) and isinstance(b, CtypesLauncher)
    err = capsys.readouterr().err
    assert err.count("kernels are called through ctypes") == 1 and "no Python headers" in err
    x, y = torch.randn(5), torch.empty(5)
    a(x, y, 5)
    assert torch.equal(y, torch.relu(x))


def test_prebuilt_spec_is_verified(monkeypatch, tmp_path):
    spec = launch_build.build(tmp_path / "harness")
    assert launch_build.build(tmp_path / "harness") == spec  # cached per toolchain
    with pytest.raises(OSError, match="no longer matches"):
        launch_build.load({**spec, "sha256": "0" * 64})
    monkeypatch.setattr(launch, "_state", dict(launch._state))
    launch.use_prebuilt({"error": "no compiler here"})
    assert launch.available() == (False, "no compiler here")


def _draft_and_reference(problem: str):
    import importlib.util

    from kernelevolve.synth import synthesize

    path = PROBLEMS / problem
    spec = importlib.util.spec_from_file_location(f"launcher_{path.stem}", path)
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
    source, _ = synthesize(str(path), "cpp")
    ns: dict = {}
    exec(compile(source, f"draft_{path.stem}", "exec"), ns)
    torch.manual_seed(0)
    model = ref.Model(*ref.get_init_inputs())
    torch.manual_seed(0)
    draft = ns["ModelNew"](*ref.get_init_inputs())
    return source, ns, ref, model, draft


def test_synthesized_elementwise_op_through_the_launcher_matches_torch():
    source, ns, ref, model, draft = _draft_and_reference("kb_level1_relu.py")
    assert '_k0 = elementwise_launcher(_lib, "k0", (torch.float32,), (torch.float32,), ' \
        'domain=0)' in source and "relu = _k0(x)" in source
    assert ".data_ptr()" not in source and "import ctypes" not in source
    assert "(ctypes)" not in repr(ns["_k0"])
    x = torch.randn(4, 8193)
    x[0, :4] = torch.tensor([float("nan"), -0.0, float("inf"), -float("inf")])
    for inp in (x, x.t(), torch.empty(0, 3)):  # a transposed view is made contiguous first
        torch.testing.assert_close(draft(inp), model(inp), equal_nan=True, rtol=0, atol=0)


def test_synthesized_gather_raises_index_error_from_the_launcher():
    source, _, ref, model, draft = _draft_and_reference("synth_embedding_bag.py")
    assert "index_flag=True" in source and "_bad" not in source
    bags = torch.randint(0, ref.NUM, (3, 4))
    torch.testing.assert_close(draft(bags), model(bags), rtol=1e-5, atol=1e-5)
    bags[1, 2] = ref.NUM
    with pytest.raises(IndexError, match="index out of range in self"):
        draft(bags)
    with pytest.raises(IndexError):
        model(bags)


def test_synthesized_solo_scan_through_the_launcher_matches_torch():
    source, _, ref, model, draft = _draft_and_reference("synth_cumsum.py")
    assert "kernel_launcher(_lib" in source and ".data_ptr()" not in source
    for x in ref.get_inputs():
        torch.testing.assert_close(draft(x), model(x), rtol=1e-5, atol=1e-5)


CANDIDATE = '''
import torch
import torch.nn as nn

from kernelevolve.runtime import kernel_launcher, load_cpp

SRC = r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}
"""
_lib = load_cpp(SRC, name="launcher_job")
_relu = kernel_launcher(_lib, "relu", (torch.float32, torch.float32), ints=1)
if "(ctypes)" in repr(_relu):
    raise RuntimeError("the job fell back to ctypes")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        if x.numel():
            _relu(x, y, x.numel())
        return y
'''


@pytest.mark.slow
def test_harness_job_loads_the_drivers_launcher_and_counts_its_launches(evaluator, tmp_path):
    """In the sandbox no compiler may run: the job uses the driver's verified build; the
    integrity gate sees the launches (a forward with them suppressed is not right)."""
    path = tmp_path / "launcher_candidate.py"
    path.write_text(CANDIDATE)
    result = evaluator.evaluate(PROBLEMS / "kb_level1_relu.py", path)
    assert result.accepted, result.reason
