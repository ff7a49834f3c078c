"""C++/OpenMP candidate for RMSNorm over the last dim: y = x / sqrt(mean(x^2) + eps) * weight.

Each thread owns whole rows. Per row: one vectorised pass accumulates the sum of squares,
a second writes x * inv_rms * weight. The row (at most 16 KiB here) is still in L1/L2 for the
second pass, so memory sees one read and one write instead of eager's six kernels. The sum
of squares is accumulated in double: it costs nothing measurable (the loop is memory-bound)
and keeps the error far below fp32 tolerance even for very long rows.
"""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" void rmsnorm_rows(const float* x, const float* weight, float* y,
                             int64_t rows, int64_t cols, double eps) {
    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        double sumsq = 0.0;
        #pragma omp simd reduction(+:sumsq)
        for (int64_t c = 0; c < cols; ++c) {
            const double v = xr[c];
            sumsq += v * v;
        }
        const float inv_rms = static_cast<float>(1.0 / std::sqrt(sumsq / cols + eps));
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv_rms * weight[c];
    }
}
"""

_lib = load_cpp(SRC, name="rmsnorm_rows")
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
