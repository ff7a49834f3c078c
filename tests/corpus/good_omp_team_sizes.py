# problem: problems/softmax_small.py
# expect: accepted
"""OpenMP regions with their own team sizes (8, 3 and 1 threads on a machine with fewer cores):
libgomp keeps the extra team members parked between regions, so threads beyond the harness's
warmed pool exist after every forward. They are idle, and a correct kernel with idle threads
is accepted (only threads still working after forward returns are hidden work)."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    // pass 1, 8 threads: y = exp(x - max)
    #pragma omp parallel for num_threads(8)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        for (int64_t c = 0; c < cols; ++c) yr[c] = std::exp(xr[c] - m);
    }
    // pass 2, 3 threads: normalise the first half of the rows
    #pragma omp parallel for num_threads(3)
    for (int64_t r = 0; r < rows / 2; ++r) {
        float* yr = y + r * cols;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += yr[c];
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
    // pass 3, 1 thread: the rest
    #pragma omp parallel for num_threads(1)
    for (int64_t r = rows / 2; r < rows; ++r) {
        float* yr = y + r * cols;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += yr[c];
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
"""
lib = load_cpp(SRC, name="corpus_omp_team_sizes")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
