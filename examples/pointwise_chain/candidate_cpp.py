"""C++/OpenMP candidate for the pointwise chain y = gelu(x * scale + bias) * sigmoid(x).

One pass over memory instead of eager's five. The inner loop is an `omp simd` loop the
compiler turns into AVX2/AVX-512 code; `exp` and `erf` are written out below as branch-free
polynomials because libm's scalar calls would stop vectorisation (and -ffast-math, which
would enable glibc's vector libm, also breaks inf/NaN handling).
"""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

# ---- Tunables: the `tune` operator rewrites these literals, trying the values in TUNABLES.
# Columns per work item. 0: a work item is a whole row. N > 0: rows are cut into N-column
# blocks and the (row, block) pairs are shared out: finer-grained work balances better when
# rows are few (64 rows on 48 threads: the 16 threads with a second row set the pace).
COL_BLOCK = 0
# OpenMP schedule of the work items. "static": one contiguous range per thread (least
# overhead); "static, N" deals N items round-robin; "dynamic, N" / "guided" hand them out at
# run time, which helps when some threads are slowed by other work.
SCHEDULE = "static"
TUNABLES = {
    "COL_BLOCK": [0, 512, 2048, 4096],
    "SCHEDULE": ["static", "static, 4", "dynamic, 4", "guided"],
}

SRC = r"""
#include <cmath>
#include <cstdint>
#include <cstring>

// exp(x) = 2^n * exp(r) with n = round(x / ln 2) and |r| <= ln(2) / 2. A degree-7 Taylor
// polynomial for exp(r) has a truncation error below 1e-8 there, so the result is within a
// few ulp of std::exp. Inputs are clamped so that 2^n stays a normal float.
static inline float exp_approx(float x) {
    x = x > 88.0f ? 88.0f : x;
    x = x < -87.0f ? -87.0f : x;
    const float n = std::floor(x * 1.44269504088896341f + 0.5f);
    float r = std::fma(n, -0.693145751953125f, x);     // ln 2, high bits (exact product)
    r = std::fma(n, -1.42860682030941723e-6f, r);      // ln 2, low bits
    float p = 1.0f / 5040.0f;
    p = std::fma(p, r, 1.0f / 720.0f);
    p = std::fma(p, r, 1.0f / 120.0f);
    p = std::fma(p, r, 1.0f / 24.0f);
    p = std::fma(p, r, 1.0f / 6.0f);
    p = std::fma(p, r, 0.5f);
    p = std::fma(p, r, 1.0f);
    p = std::fma(p, r, 1.0f);
    const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

// Standard normal CDF via erfc (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7). Using erfc
// of |h| keeps the left tail accurate instead of computing 1 + erf(h) with cancellation.
static inline float normal_cdf(float h) {
    const float z = std::fabs(h) * 0.70710678118654752f;
    const float t = 1.0f / std::fma(0.3275911f, z, 1.0f);
    float poly = 1.061405429f;
    poly = std::fma(poly, t, -1.453152027f);
    poly = std::fma(poly, t, 1.421413741f);
    poly = std::fma(poly, t, -0.284496736f);
    poly = std::fma(poly, t, 0.254829592f);
    const float half_erfc = 0.5f * poly * t * exp_approx(-z * z);
    return h >= 0.0f ? 1.0f - half_erfc : half_erfc;
}

extern "C" void pointwise_chain(const float* x, const float* bias, float* y,
                                int64_t rows, int64_t cols, float scale) {
    // A work item is one COL_BLOCK-wide piece of one row (the whole row when COL_BLOCK is 0).
    const int64_t block = COL_BLOCK > 0 ? COL_BLOCK : cols;
    const int64_t blocks = (cols + block - 1) / block;
    #pragma omp parallel for collapse(2) schedule(SCHEDULE)
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t b = 0; b < blocks; ++b) {
            const float* xr = x + r * cols;
            float* yr = y + r * cols;
            const int64_t c_end = (b + 1) * block < cols ? (b + 1) * block : cols;
            #pragma omp simd
            for (int64_t c = b * block; c < c_end; ++c) {
                const float xv = xr[c];
                const float h = xv * scale + bias[c];
                const float gelu = h * normal_cdf(h);
                const float sigmoid = 1.0f / (1.0f + exp_approx(-xv));
                yr[c] = gelu * sigmoid;
            }
        }
    }
}
"""

# -fno-trapping-math lets GCC vectorise floor() and the float->int conversion in exp_approx
# (without it the loop stays scalar: 17 ms instead of ~2 ms at 1024x2048). Unlike
# -ffast-math it keeps IEEE inf/NaN semantics. The tunables enter as macros.
CONFIG = f"#define COL_BLOCK {COL_BLOCK}\n#define SCHEDULE {SCHEDULE}\n"
_lib = load_cpp(CONFIG + SRC, name="pointwise_chain", flags=("-fno-trapping-math",))
_lib.pointwise_chain.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_int64, ctypes.c_int64, ctypes.c_float]
_lib.pointwise_chain.restype = None


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(0.5 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        bias = self.bias.detach().contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        y = torch.empty_like(x)
        if x.numel():
            _lib.pointwise_chain(ptr(x), ptr(bias), ptr(y), rows, cols, self.scale)
        return y
