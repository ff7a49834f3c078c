# problem: softmax
# expect: correctness
# reason: tail_131x999
"""Vectorised by 8 with no remainder loop: right on the 2048/8192 cases, wrong on the tail."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    const int64_t full = cols / 8 * 8;  // BUG: columns past the last multiple of 8 are skipped
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < full; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < full; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        for (int64_t c = full; c < cols; ++c) yr[c] = 0.0f;
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < full; ++c) yr[c] *= inv;
    }
}
"""
lib = load_cpp(SRC, name="corpus_softmax")
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
