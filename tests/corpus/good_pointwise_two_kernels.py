# problem: pointwise_chain
# expect: accepted
# timing: short
"""Two C++ kernels in sequence: the first computes gelu(x * scale + bias) into the output, the
second multiplies it by sigmoid(x) in place. Less fused than one kernel, still correct and
still entirely the candidate's own code."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void affine_gelu(const float* x, const float* bias, float* y, int64_t rows,
                            int64_t cols, float scale) {
    #pragma omp parallel for schedule(static) if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
            const float h = x[r * cols + c] * scale + bias[c];
            y[r * cols + c] = 0.5f * h * (1.0f + std::erf(h * 0.70710678118654752f));
        }
    }
}
extern "C" void mul_sigmoid(const float* x, float* y, int64_t n) {
    #pragma omp parallel for schedule(static) if(n > 32768)
    for (int64_t i = 0; i < n; ++i) y[i] *= 1.0f / (1.0f + std::exp(-x[i]));
}
"""
lib = load_cpp(SRC, name="corpus_pointwise_two")
lib.affine_gelu.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                            ctypes.c_int64, ctypes.c_float]
lib.affine_gelu.restype = None
lib.mul_sigmoid.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
lib.mul_sigmoid.restype = None


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(0.5 * torch.randn(features))

    def forward(self, x):
        x = x.contiguous()
        bias = self.bias.detach().contiguous()
        y = torch.empty_like(x)
        lib.affine_gelu(ptr(x), ptr(bias), ptr(y), x.shape[0], x.shape[1], self.scale)
        lib.mul_sigmoid(ptr(x), ptr(y), x.numel())
        return y
