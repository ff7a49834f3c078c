# problem: problems/softmax_small.py
# expect: accepted
"""Memoises the output per input *content*, keyed on four sampled elements and the shape: cheap
to compute, and enough to tell a few rotating timing input sets apart, so every timed call after
the first pass over the sets is a cache hit (13x seen). It is accepted, and at its
real speed: every timed call gets input content the candidate's process has not seen, so the
cache never hits (tests/test_measure.py checks the speedup against the honest kernel's)."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <initializer_list>
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
extern "C" uint64_t sample_key(const float* x, int64_t n) {
    const uint32_t* b = reinterpret_cast<const uint32_t*>(x);
    uint64_t key = 1469598103934665603ull;
    for (int64_t i : {int64_t(0), n / 3, n / 2, n - 1}) key = (key ^ b[i]) * 1099511628211ull;
    return key;
}
"""
lib = load_cpp(SRC, name="corpus_cache_sampled")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
lib.sample_key.argtypes = [ctypes.c_void_p, ctypes.c_int64]
lib.sample_key.restype = ctypes.c_uint64


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = {}

    def forward(self, x):
        x = x.contiguous()
        key = (lib.sample_key(ptr(x), x.numel()), tuple(x.shape))
        hit = self.cache.get(key)
        if hit is not None:
            return hit.clone()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        self.cache[key] = y.clone()
        return y
