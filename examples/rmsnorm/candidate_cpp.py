"""C++/OpenMP candidate for RMSNorm over the last dim: y = x / sqrt(mean(x^2) + eps) * weight.

Each thread owns whole rows. Per row: one vectorised pass accumulates the sum of squares,
a second writes x * inv_rms * weight. The row (at most 16 KiB here) is still in L1/L2 for the
second pass, so memory sees one read and one write instead of eager's six kernels. The sum
of squares is accumulated in double by default: it costs nothing measurable (the loop is
memory-bound) and keeps the error far below fp32 tolerance even for very long rows.
"""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

# ---- Tunables: the `tune` operator rewrites these literals, trying the values in TUNABLES.
# OpenMP schedule of the row loop. "static": one contiguous block of rows per thread (least
# overhead); "static, N" deals N-row chunks round-robin; "dynamic, N" / "guided" hand chunks
# out at run time, which helps when some threads are slowed by other work.
SCHEDULE = "static"
# Type of the sum-of-squares accumulator. "double" keeps the error far below fp32 tolerance
# for any row length; "float" doubles the SIMD width of the first pass (16 vs 8 lanes on
# AVX-512), which only pays off when the rows sit in cache.
ACCUMULATOR = "double"
# Run on one thread below this many elements: waking the OpenMP team costs microseconds,
# a sizeable part of a 63x1537 row norm. 0: always parallel.
PARALLEL_MIN_ELEMENTS = 0
TUNABLES = {
    "SCHEDULE": ["static", "static, 8", "static, 32", "dynamic, 8", "guided"],
    "ACCUMULATOR": ["double", "float"],
    "PARALLEL_MIN_ELEMENTS": [0, 32768, 131072],
}

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" void rmsnorm_rows(const float* x, const float* weight, float* y,
                             int64_t rows, int64_t cols, double eps) {
    #pragma omp parallel for schedule(SCHEDULE) if (rows * cols >= PARALLEL_MIN_ELEMENTS)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        ACCUMULATOR sumsq = 0;
        #pragma omp simd reduction(+:sumsq)
        for (int64_t c = 0; c < cols; ++c) {
            const ACCUMULATOR v = xr[c];
            sumsq += v * v;
        }
        const float inv_rms = static_cast<float>(1.0 / std::sqrt(sumsq / cols + eps));
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv_rms * weight[c];
    }
}
"""

# The tunables enter the C++ source as macros.
CONFIG = (f"#define SCHEDULE {SCHEDULE}\n"
          f"#define ACCUMULATOR {ACCUMULATOR}\n"
          f"#define PARALLEL_MIN_ELEMENTS {PARALLEL_MIN_ELEMENTS}\n")
_lib = load_cpp(CONFIG + SRC, name="rmsnorm_rows")
_lib.rmsnorm_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_int64, ctypes.c_int64, ctypes.c_double]
_lib.rmsnorm_rows.restype = None


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        weight = self.weight.detach().contiguous()
        cols = x.shape[-1]
        rows = x.numel() // cols if cols else 0
        y = torch.empty_like(x)
        if x.numel():
            _lib.rmsnorm_rows(ptr(x), ptr(weight), ptr(y), rows, cols, self.eps)
        return y
