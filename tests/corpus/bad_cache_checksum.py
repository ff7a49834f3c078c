# problem: problems/softmax_small.py
# expect: accepted
"""Memoises the output per input *content*, keyed on a cheap checksum (the sum of every 97th
element, in C++): a few microseconds against a softmax's hundreds, and no two rotating timing
sets collide. It is accepted, and at its real speed: every timed call
gets input content the candidate's process has not seen, so the cache never hits
(tests/test_measure.py checks the speedup against the honest kernel's)."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
extern "C" double checksum(const float* x, int64_t n) {
    double s = 0.0;
    for (int64_t i = 0; i < n; i += 97) s += x[i] * double(i % 13 + 1);
    return s;
}
"""
lib = load_cpp(SRC, name="corpus_cache_checksum")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
lib.checksum.argtypes = [ctypes.c_void_p, ctypes.c_int64]
lib.checksum.restype = ctypes.c_double


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        x = x.contiguous()
        key = (lib.checksum(ptr(x), x.numel()), tuple(x.shape))
        hit = self.cache.get(key)
        if hit is not None:
            return hit.clone()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        self.cache[key] = y.clone()
        return y
