"""Accuracy of the synthesizer's vectorisable math (FAST_EXP=1), compiled with the flags the
drafts use and compared with float64 torch over dense grids, plus inf/NaN semantics."""
from __future__ import annotations

import ctypes

import pytest
import torch

from kernelevolve.runtime import load_cpp
from kernelevolve.synth.cpp_prelude import PRELUDE

FUNCS = {"exp": "ke_exp_poly", "sigmoid": "ke_sigmoid", "tanh": "ke_tanh", "erf": "ke_erf",
         "erf_rational": "ke_erf_rational", "normal_cdf": "ke_normal_cdf"}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    import os

    os.environ["KERNELEVOLVE_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    wrappers = "\n".join(
        f'extern "C" void apply_{name}(const float* x, float* y, int64_t n) {{\n'
        f"    #pragma omp simd\n    for (int64_t i = 0; i < n; ++i) y[i] = {fn}(x[i]);\n}}"
        for name, fn in FUNCS.items())
    lib = load_cpp("#define FAST_EXP 1\n" + PRELUDE + wrappers, name="synth_math",
                   flags=("-fno-math-errno", "-fno-trapping-math",
                          "-mprefer-vector-width=512"))
    for name in FUNCS:
        getattr(lib, f"apply_{name}").argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64]
    return lib


def apply(lib, name, x):
    x = x.to(torch.float32).contiguous()
    y = torch.empty_like(x)
    getattr(lib, f"apply_{name}")(x.data_ptr(), y.data_ptr(), x.numel())
    return y


def grid(lo, hi, n=400_001):
    return torch.linspace(lo, hi, n, dtype=torch.float32)


def test_exp_relative_error_and_ends(lib):
    x = grid(-87.0, 88.5)
    want = torch.exp(x.double())
    rel = ((apply(lib, "exp", x).double() - want) / want).abs().max().item()
    assert rel < 3e-7
    ends = torch.tensor([float("-inf"), -200.0, 200.0, float("inf"), float("nan"), 0.0])
    got = apply(lib, "exp", ends)
    assert got[:2].tolist() == [0.0, 0.0] and got[2:4].tolist() == [float("inf")] * 2
    assert got[4].isnan() and got[5].item() == 1.0


@pytest.mark.parametrize("name,ref,bound", [
    ("sigmoid", torch.sigmoid, 2e-7), ("tanh", torch.tanh, 3e-7), ("erf", torch.erf, 3e-7),
    ("erf_rational", torch.erf, 5e-7),
    ("normal_cdf", lambda x: 0.5 * (1 + torch.erf(x / 2 ** 0.5)), 3e-7),
])
def test_absolute_error_and_nan(lib, name, ref, bound):
    x = grid(-12.0, 12.0)
    err = (apply(lib, name, x).double() - ref(x.double())).abs().max().item()
    assert err < bound, f"{name}: max abs error {err}"
    special = apply(lib, name, torch.tensor([float("nan"), float("inf"), float("-inf")]))
    assert special[0].isnan()
    want = ref(torch.tensor([float("inf"), float("-inf")], dtype=torch.float64))
    assert special[1:].double().tolist() == want.tolist()


def test_tanh_and_erf_keep_relative_accuracy_near_zero(lib):
    x = grid(-0.5, 0.5)
    x = x[x != 0]
    for name, ref in (("tanh", torch.tanh), ("erf", torch.erf), ("erf_rational", torch.erf)):
        want = ref(x.double())
        rel = ((apply(lib, name, x).double() - want) / want).abs().max().item()
        assert rel < 1e-6, f"{name}: relative error {rel} near 0"
