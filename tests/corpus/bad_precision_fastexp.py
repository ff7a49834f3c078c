# problem: problems/softmax_small.py
# expect: correctness
# reason: wrong result
"""Replaces exp with a cheap bit-trick approximation (Schraudolph's: about 4% relative error)
for speed; fine for a "soft" attention score, far outside a float32 tolerance."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
static inline float fast_exp(float x) {
    x = x < -87.0f ? -87.0f : x;
    const int32_t bits = static_cast<int32_t>(12102203.0f * x) + 1065353216;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < cols; ++c) { yr[c] = fast_exp(xr[c] - m); s += yr[c]; }
        const float inv = 1.0f / s;
        #pragma omp simd
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
"""
lib = load_cpp(SRC, name="corpus_softmax_fastexp")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
