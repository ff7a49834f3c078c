"""The synthesizer's vectorisable math (FAST_EXP=1), compiled with the flags the drafts use:
accuracy in float32 ulps against float64 torch over dense grids, inf / NaN / signed-zero
results against float32 torch on edge inputs, exact fmod, and that every function leaves
its `omp simd` loop vectorised (what they are for)."""
from __future__ import annotations

import ctypes
import platform
import re
import subprocess

import pytest
import torch

from kernelevolve.runtime import load_cpp
from kernelevolve.synth.cpp_prelude import PRELUDE

FLAGS = ("-fno-math-errno", "-fno-trapping-math", "-mprefer-vector-width=512")
NAN, INF = float("nan"), float("inf")

# name: (C++ function, torch reference, grids, max error in float32 ulps over the grids)
UNARY = {
    "exp": ("ke_exp_poly", torch.exp, [(-104, 89), (-1, 1)], 1.5),
    "exp2": ("ke_exp2", torch.exp2, [(-151, 128.5)], 1.5),
    "expm1": ("ke_expm1", torch.expm1, [(-30, 89), (-1, 1), (-1e-3, 1e-3)], 2),
    "log": ("ke_log", torch.log, [(0, 10), (1, 3e38), (1e-44, 1e-36)], 1.5),
    "log2": ("ke_log2", torch.log2, [(0, 10), (1, 3e38)], 2.5),
    "log10": ("ke_log10", torch.log10, [(0, 10), (1, 3e38)], 3),
    "log1p": ("ke_log1p", torch.log1p, [(-1, 1), (-1e-4, 1e-4), (0, 3e38)], 2),
    "sin": ("ke_sin", torch.sin, [(-10, 10), (-262144, 262144), (-1e-3, 1e-3)], 2),
    "cos": ("ke_cos", torch.cos, [(-10, 10), (-262144, 262144)], 2),
    "tan": ("ke_tan", torch.tan, [(-10, 10), (-262144, 262144), (-1e-3, 1e-3)], 3.5),
    "atan": ("ke_atan", torch.atan, [(-10, 10), (-1e30, 1e30), (-1e-3, 1e-3)], 2.5),
    "asin": ("ke_asin", torch.asin, [(-1, 1), (-1e-3, 1e-3), (0.99, 1)], 2.5),
    "acos": ("ke_acos", torch.acos, [(-1, 1), (0.99, 1), (-1, -0.99)], 2),
    "sinh": ("ke_sinh", torch.sinh, [(-90, 90), (-2, 2), (-1e-3, 1e-3)], 2),
    "cosh": ("ke_cosh", torch.cosh, [(-90, 90), (-2, 2)], 2),
    "asinh": ("ke_asinh", torch.asinh, [(-10, 10), (-1e-3, 1e-3), (-3e38, 3e38)], 2.5),
    "acosh": ("ke_acosh", torch.acosh, [(1, 10), (1, 1.001), (1, 3e38)], 2.5),
    "atanh": ("ke_atanh", torch.atanh, [(-1, 1), (-1e-3, 1e-3), (0.999, 1)], 2.5),
    "erf": ("ke_erf", torch.erf, [(-6, 6), (-1e-3, 1e-3)], 3),
    "erfc": ("ke_erfc", torch.erfc, [(-6, 10.05), (-1e-3, 1e-3), (5, 10.05)], 4),
    "tanh": ("ke_tanh", torch.tanh, [(-12, 12), (-0.5, 0.5)], 3),
    "sigmoid": ("ke_sigmoid", torch.sigmoid, [(-88, 30)], 3),
    "round": ("std::nearbyint", torch.round, [(-1e7, 1e7), (-3, 3)], 0),
}
BINARY = {
    "atan2": ("ke_atan2", torch.atan2, 3),
    "hypot": ("ke_hypot", torch.hypot, 0.5),
    "fmod": ("ke_fmod", torch.fmod, 0),
    "remainder": ("ke_frem", torch.remainder, 0),
    "floor_divide": ("ke_ffloordiv", torch.floor_divide, 0),
    "nextafter": ("ke_nextafter", torch.nextafter, 0),
    "copysign": ("std::copysign", torch.copysign, 0),
    "pow": ("ke_pow", torch.pow, 1),
}
# the one-step fmod family (the flat kernels' first pass) and its exact 13-step counterpart
FAST = {"fmod": "ke_fmod_fast", "remainder": "ke_frem_fast", "floor_divide": "ke_ffloordiv_fast"}
EDGES = [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 1.0000001, -1.0000001, 0.99999994, 0.5, -0.5,
         1.5, -2.5, 2.5, 88.72283, 88.7229, -87.5, -103.97, -104.5, 89.5, 90.0, 128.0, -149.0,
         -150.0, 3.4028235e38, -3.4028235e38, 1.1754942e-38, 1e-30, 262144.0, -262144.0, 1e5,
         1.5707964, 3.1415927, 10.05, 10.1, -10.0, 2.0 ** 28, 2.0 ** 29, 8388608.5, 0.49999997]
PAIR_EDGES = [0.0, -0.0, INF, -INF, NAN, 1.0, -1.0, 3.0, -3.0, 5.0, 1e30, 7.5, 1e-40]


def _wrappers() -> str:
    out = []
    for name, (fn, *_) in UNARY.items():
        out.append(f'extern "C" void u_{name}(const float* x, float* y, int64_t n) {{\n'
                   f"    #pragma omp simd\n"
                   f"    for (int64_t i = 0; i < n; ++i) y[i] = {fn}(x[i]);\n}}")
    for name, (fn, *_) in BINARY.items():
        out.append(f'extern "C" void b_{name}(const float* a, const float* b, float* y, int64_t n)'
                   f" {{\n    #pragma omp simd\n    for (int64_t i = 0; i < n; ++i) "
                   f"y[i] = {fn}(a[i], b[i]);\n}}")
    for name, fn in FAST.items():
        out.append(f'extern "C" void f_{name}(const float* a, const float* b, float* y, '
                   f"int32_t* far, int64_t n) {{\n    #pragma omp simd\n"
                   f"    for (int64_t i = 0; i < n; ++i) {{ int f = 0; y[i] = {fn}(f, a[i], b[i]);"
                   f" far[i] = f; }}\n}}")
    return "\n".join(out)


SOURCE = "#define FAST_EXP 1\n#define ROWS_PER_TASK 0\n" + PRELUDE + _wrappers()


@pytest.fixture(scope="module")
def lib():
    lib = load_cpp(SOURCE, name="synth_math", flags=FLAGS)
    for name in UNARY:
        getattr(lib, f"u_{name}").argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64]
    for name in BINARY:
        getattr(lib, f"b_{name}").argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64]
    for name in FAST:
        getattr(lib, f"f_{name}").argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64]
    return lib


def unary(lib, name, x):
    x = x.to(torch.float32).contiguous()
    y = torch.empty_like(x)
    getattr(lib, f"u_{name}")(x.data_ptr(), y.data_ptr(), x.numel())
    return y


def binary(lib, name, a, b):
    a, b = a.to(torch.float32).contiguous(), b.to(torch.float32).contiguous()
    y = torch.empty_like(a)
    getattr(lib, f"b_{name}")(a.data_ptr(), b.data_ptr(), y.data_ptr(), a.numel())
    return y


def ulps(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """|got - want| in float32 ulps at `want` (float64); 0 where got is want rounded."""
    w32 = want.float()
    exponent = torch.floor(torch.log2(w32.double().abs().clamp_min(2.0 ** -126)))
    ulp = torch.pow(2.0, exponent - 23)
    err = (got.double() - want).abs() / ulp
    err[got == w32] = 0.0
    err[~torch.isfinite(want) & (got.double() == want)] = 0.0
    return torch.nan_to_num(err, nan=float("inf"))


def same(got: torch.Tensor, want: torch.Tensor, max_ulps: float = 4) -> torch.Tensor:
    """Equal up to max_ulps, with NaN where want is NaN and the same sign bit (zeros too)."""
    both_nan = got.isnan() & want.isnan()
    sign = torch.signbit(got) == torch.signbit(want)
    close = ulps(got, want.double()) <= max_ulps
    return both_nan | (sign & close & ~got.isnan() & ~want.isnan())


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_accuracy_over_dense_grids(lib, name):
    _, ref, grids, bound = UNARY[name]
    for lo, hi in grids:
        x = torch.linspace(lo, hi, 400_001, dtype=torch.float64).float()
        err = ulps(unary(lib, name, x), ref(x.double()))
        worst = int(err.argmax())
        assert err[worst] <= bound, (f"{name} on [{lo}, {hi}]: {err[worst]:.2f} ulp at "
                                     f"x={x[worst].item()!r}")


# Where torch's own float32 result is not the function's value, or ours is NaN by design:
# torch's vectorised kernels flush a subnormal log1p input to 0 and overflow sinh / cosh
# from x = 88.7229 (its scalar path, for short tensors, gives the finite value, as we do);
# sin / cos / tan are NaN beyond |x| = 2^18 (cpp_trig.py).
_BIG = {3.4028235e38, -3.4028235e38, 2.0 ** 28, 2.0 ** 29, 8388608.5}
KNOWN = {"log1p": {1e-40, -1e-40}, "sinh": {88.7229}, "cosh": {88.7229},
         "sin": _BIG, "cos": _BIG, "tan": _BIG}


def _f32(values) -> set[float]:
    return set(torch.tensor(sorted(values), dtype=torch.float32).tolist())


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_edges_match_torch(lib, name):
    _, ref, _, _ = UNARY[name]
    x = torch.tensor(EDGES + [1e-40, -1e-40], dtype=torch.float32)
    got, want = unary(lib, name, x), ref(x)
    known = _f32(KNOWN.get(name, ()))
    skip = torch.tensor([v in known for v in x.tolist()])
    bad = ~same(got, want) & ~skip
    assert not bad.any(), [(x[i].item(), got[i].item(), want[i].item())
                           for i in torch.nonzero(bad).flatten().tolist()]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_edges_and_random_values_match_torch(lib, name):
    _, ref, bound = BINARY[name]
    edges = torch.tensor(PAIR_EDGES, dtype=torch.float32)
    a, b = (t.flatten() for t in torch.meshgrid(edges, edges, indexing="ij"))
    g = torch.Generator().manual_seed(0)
    ra = torch.randn(200_000, generator=g) * 100
    rb = torch.randn(200_000, generator=g) * torch.exp(torch.randn(200_000, generator=g) * 3)
    a, b = torch.cat([a, ra]), torch.cat([b, rb])
    got, want = binary(lib, name, a, b), ref(a, b)
    # torch's vectorised fmod / remainder give NaN for a subnormal divisor (its scalar tail
    # gives C's fmod, as we do)
    skip = (b.abs() < 1.2e-38) & (b != 0) if name in ("fmod", "remainder") else \
        torch.zeros_like(a, dtype=torch.bool)
    bad = ~same(got, want, max(bound, 0.5) if bound else 0) & ~skip
    assert not bad.any(), [(a[i].item(), b[i].item(), got[i].item(), want[i].item())
                           for i in torch.nonzero(bad).flatten().tolist()[:8]]


def test_fmod_is_exact_across_every_exponent_gap(lib):
    g = torch.Generator().manual_seed(1)
    a = torch.exp(torch.randn(400_000, generator=g) * 40) * torch.randn(400_000, generator=g)
    b = torch.exp(torch.randn(400_000, generator=g) * 40) * torch.randn(400_000, generator=g)
    keep = torch.isfinite(a) & torch.isfinite(b) & (b != 0)
    a, b = a[keep].float(), b[keep].float()
    want = torch.fmod(a.double(), b.double()).float()   # exact: the remainder is a float
    assert torch.equal(binary(lib, "fmod", a, b), want)
    huge = torch.tensor([3.4028235e38, 1e30, 1e-45, 1e-38])
    tiny = torch.tensor([1e-45, 3e-45, 7.0, 1e-40])
    assert torch.equal(binary(lib, "fmod", huge, tiny), torch.fmod(huge.double(),
                                                                    tiny.double()).float())


def test_one_step_fmod_is_exact_below_its_bound_and_says_where_it_is_not(lib):
    """ke_fmod_fast and its remainder / floor division give the exact 13-step functions' bits
    (signed zeros and NaN included) wherever the quotient is below 2^28, and raise `far`
    exactly where it is not (the kernel then runs again exactly)."""
    g = torch.Generator().manual_seed(3)
    a = torch.exp(torch.randn(300_000, generator=g) * 12) * torch.randn(300_000, generator=g)
    b = torch.exp(torch.randn(300_000, generator=g) * 12) * torch.randn(300_000, generator=g)
    edges = torch.tensor(PAIR_EDGES)
    a = torch.cat([a.float(), edges.repeat_interleave(len(PAIR_EDGES))])
    b = torch.cat([b.float(), edges.repeat(len(PAIR_EDGES))])
    quotient = (a.double() / b.double()).abs()
    for name in FAST:
        y = torch.empty_like(a)
        far = torch.empty(a.numel(), dtype=torch.int32)
        getattr(lib, f"f_{name}")(a.data_ptr(), b.data_ptr(), y.data_ptr(), far.data_ptr(),
                                  a.numel())
        should = (quotient >= 2.0 ** 28) & torch.isfinite(a) & (b != 0)
        assert torch.equal(far.bool(), should), name
        assert 0 < int(should.sum()) < a.numel() // 4, "the draw must hold both kinds"
        want = binary(lib, name, a, b)
        near = ~should
        same_bits = (y.view(torch.int32) == want.view(torch.int32)) | (y.isnan() & want.isnan())
        bad = near & ~same_bits
        assert not bad.any(), (name, [(a[i].item(), b[i].item(), y[i].item(), want[i].item())
                                      for i in torch.nonzero(bad).flatten().tolist()[:5]])


def test_pow_is_within_an_ulp_of_the_exact_power_for_any_exponent(lib):
    """ke_pow against float64 pow rounded to float: positive bases over many octaves with large
    exponents (where exp(y log x) in float loses |y log2 x| ulps), negative bases with integer
    exponents (the sign of odd ones), results down in the subnormals."""
    g = torch.Generator().manual_seed(4)
    n = 300_000
    x = torch.exp2(torch.rand(n, generator=g) * 40 - 20)
    y = (torch.rand(n, generator=g) * 2 - 1) * 60
    xi = -torch.exp2(torch.rand(n // 3, generator=g) * 8 - 4)
    yi = torch.randint(-40, 41, (n // 3,), generator=g).float()
    xs = torch.tensor([2.0, 0.5, 10.0, 1.0000001, 0.9999999, 3.0])
    ys = torch.tensor([-149.0, 127.5, -44.0, 1e6, -1e6, -94.0])
    a, b = torch.cat([x, xi, xs]).float(), torch.cat([y, yi, ys]).float()
    got = binary(lib, "pow", a, b)
    want = torch.pow(a.double(), b.double())
    err = ulps(got, want)
    assert err.max() <= 1, [(a[i].item(), b[i].item(), got[i].item(), want[i].item())
                            for i in torch.nonzero(err > 1).flatten().tolist()[:5]]
    assert (err <= 0.5).float().mean() > 0.999   # correctly rounded almost everywhere


def test_trig_is_nan_beyond_its_reduction_bound(lib):
    x = torch.tensor([262144.0, 262144.03, -3e5, 1e30])
    for name in ("sin", "cos", "tan"):
        got = unary(lib, name, x)
        assert not got[0].isnan() and got[1:].isnan().all(), name


def test_hard_cases_near_multiples_of_half_pi(lib):
    k = torch.arange(1, 160_000, 7, dtype=torch.float64)
    x = (k * torch.pi / 2).float()
    x = x[x.abs() <= 262144]
    for name, ref in (("sin", torch.sin), ("cos", torch.cos)):
        err = ulps(unary(lib, name, x), ref(x.double()))
        assert err.max() <= 2, (name, x[int(err.argmax())].item(), err.max().item())


@pytest.mark.slow
@pytest.mark.skipif(platform.machine() != "x86_64", reason="the ISA levels named are x86's")
@pytest.mark.parametrize("isa", ["x86-64-v3", "x86-64-v4"])
def test_every_function_leaves_its_loop_vectorised(tmp_path, isa):
    """g++ reports each `omp simd` loop it vectorises; a branch or a libm call in a function
    would leave its wrapper's loop scalar (without -ffast-math libm has no vector variant).
    Compiled (not run) for AVX2 and for AVX-512 whatever this CPU has: -march=native made the
    answer the machine's (pow's int64 -> double exponent has a vector form in AVX-512DQ only,
    so its loop was scalar on an AVX2 CI machine and vectorised on an AVX-512 one)."""
    src = tmp_path / "vec.cpp"
    src.write_text(SOURCE)
    proc = subprocess.run(["g++", "-O3", f"-march={isa}", "-fopenmp", "-std=c++17", "-fPIC",
                           "-c", str(src), "-o", str(tmp_path / "vec.o"),
                           "-fopt-info-vec-optimized", *FLAGS],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = {int(m.group(1)) for m in re.finditer(r"vec\.cpp:(\d+):\d+: optimized: loop "
                                                 r"vectorized", proc.stderr)}
    lines = SOURCE.splitlines()
    loops = {}
    for i, line in enumerate(lines, start=1):
        m = re.match(r'extern "C" void ([ubf]_\w+)\(', line)
        if m:
            loops[m.group(1)] = i + 2     # the `for` line after the pragma
    missing = [name for name, line in loops.items() if line not in done]
    assert not missing, f"not vectorised: {missing}"


@pytest.mark.slow
def test_fmod_with_a_constant_divisor_takes_fewer_steps_and_stays_exact():
    """cpp_expr gives ke_fmod the steps a constant divisor needs (the gap to FLT_MAX); with
    them the remainder is still exact for dividends of every exponent."""
    from kernelevolve.synth.cpp_expr import fmod_steps

    divisors = [0.7, 3.0, -1e-30, 1e-45, 2.5e-38, 1e30, 3.4e38, 1.0]
    steps = [fmod_steps(d) for d in divisors]
    assert steps[0] == 6 and steps[3] == 13 and steps[6] == 1 and steps[5] < 13
    fns = "\n".join(
        f'extern "C" void c{j}(const float* a, float* y, int64_t n) {{\n    #pragma omp simd\n'
        f"    for (int64_t i = 0; i < n; ++i) y[i] = ke_fmod<{s}>(a[i], {d!r}f);\n}}"
        for j, (d, s) in enumerate(zip(divisors, steps)))
    lib = load_cpp("#define FAST_EXP 1\n#define ROWS_PER_TASK 0\n" + PRELUDE + fns,
                   name="fmod_const", flags=FLAGS)
    g = torch.Generator().manual_seed(2)
    a = torch.exp(torch.rand(200_000, generator=g) * 190 - 100) * torch.randn(200_000,
                                                                                generator=g)
    a = torch.cat([a, torch.tensor([3.4028235e38, -3.4028235e38, 1e-45, 0.0, -0.0])]).float()
    for j, d in enumerate(divisors):
        f = getattr(lib, f"c{j}")
        f.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int64]
        y = torch.empty_like(a)
        f(a.data_ptr(), y.data_ptr(), a.numel())
        want = torch.fmod(a.double(), torch.tensor(d, dtype=torch.float32).double()).float()
        both_nan = y.isnan() & want.isnan()
        ok = both_nan | ((y == want) & (torch.signbit(y) == torch.signbit(want)))
        assert ok.all(), (d, a[~ok][:4].tolist(), y[~ok][:4].tolist())
