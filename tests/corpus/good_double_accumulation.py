# problem: problems/rounding_noise.py
# expect: accepted
# timing: short
"""Accumulates both sums in double, so the difference it returns is about 1e-15 where the float32
reference shows about 1e-6 of rounding noise. Every element is within tolerance of the
reference; the anti-zeros check, which would see a norm ratio of ~0, stands aside because the
reference itself is noise (measured against the same model in float64)."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cstdint>
extern "C" void sum_difference(const float* a, const float* b, float* y, int64_t rows,
                               int64_t cols) {
    #pragma omp parallel for if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        double forward = 0.0, backward = 0.0;
        for (int64_t c = 0; c < cols; ++c) forward += double(a[r * cols + c]) * b[r * cols + c];
        for (int64_t c = cols - 1; c >= 0; --c) backward += double(a[r * cols + c]) * b[r * cols + c];
        y[r] = static_cast<float>(forward - backward);
    }
}
"""
lib = load_cpp(SRC, name="corpus_double_accumulation")
lib.sum_difference.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_int64]
lib.sum_difference.restype = None


class ModelNew(nn.Module):
    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        y = torch.empty(a.shape[0], dtype=a.dtype)
        lib.sum_difference(ptr(a), ptr(b), ptr(y), a.shape[0], a.shape[1])
        return y
