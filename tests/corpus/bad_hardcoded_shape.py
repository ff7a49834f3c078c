# problem: softmax
# expect: correctness
# reason: 128x8192
"""The row length of the first case (2048) is baked into the C++ kernel as a constant, and the row
count is derived from numel: right on 512x2048, wrong on every other shape."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
constexpr int64_t COLS = 2048;  // DIM of the benchmark
extern "C" void softmax_2048(const float* x, float* y, int64_t numel) {
    const int64_t rows = numel / COLS;
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * COLS;
        float* yr = y + r * COLS;
        float m = -INFINITY;
        for (int64_t c = 0; c < COLS; ++c) m = xr[c] > m ? xr[c] : m;
        float s = 0.0f;
        #pragma omp simd reduction(+:s)
        for (int64_t c = 0; c < COLS; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        const float inv = 1.0f / s;
        #pragma omp simd
        for (int64_t c = 0; c < COLS; ++c) yr[c] *= inv;
    }
}
"""
lib = load_cpp(SRC, name="corpus_softmax_2048")
lib.softmax_2048.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
lib.softmax_2048.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_2048(ptr(x), ptr(y), x.numel())
        return y
