# problem: rmsnorm
# expect: accepted
# timing: short
"""A legitimate partial replacement: torch still computes the mean of squares per row, and a
C++ kernel fuses the rest (rsqrt, the two multiplies) into one pass. Its torch ops do not
cover the reference's, and the kernel does real work, so it is not a fallback."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void rms_scale(const float* x, const float* mean_sq, const float* weight, float* y,
                          int64_t rows, int64_t cols, float eps) {
    #pragma omp parallel for schedule(static) if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        const float inv_rms = 1.0f / std::sqrt(mean_sq[r] + eps);
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] = xr[c] * inv_rms * weight[c];
    }
}
"""
lib = load_cpp(SRC, name="corpus_rms_scale")
lib.rms_scale.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64, ctypes.c_int64, ctypes.c_float]
lib.rms_scale.restype = None


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        mean_sq = x.pow(2).mean(dim=-1).contiguous()
        weight = self.weight.detach().contiguous()
        y = torch.empty_like(x)
        lib.rms_scale(ptr(x), ptr(mean_sq), ptr(weight), ptr(y), x.shape[0], x.shape[1],
                      self.eps)
        return y
