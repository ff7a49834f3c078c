# problem: problems/softmax_small.py
# expect: accepted
# timing: short
"""A candidate that builds two libraries with `load_cpp` (a row-maximum kernel and an
exp-normalise kernel, compiled with different flags): each is built by the driver, inspected
and loaded read-only, and both are recorded as the node's artifacts."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

MAX_SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void row_max(const float* x, float* m, int64_t rows, int64_t cols) {
    #pragma omp parallel for if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        float best = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) best = x[r * cols + c] > best ? x[r * cols + c] : best;
        m[r] = best;
    }
}
"""
NORM_SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void exp_normalise(const float* x, const float* m, float* y, int64_t rows,
                              int64_t cols) {
    #pragma omp parallel for if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) {
            y[r * cols + c] = std::exp(x[r * cols + c] - m[r]);
            s += y[r * cols + c];
        }
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] *= inv;
    }
}
"""
max_lib = load_cpp(MAX_SRC, name="corpus_row_max")
norm_lib = load_cpp(NORM_SRC, name="corpus_exp_normalise", flags=("-fno-math-errno",))
max_lib.row_max.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
max_lib.row_max.restype = None
norm_lib.exp_normalise.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_int64]
norm_lib.exp_normalise.restype = None


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        m = torch.empty(x.shape[0], dtype=x.dtype)
        y = torch.empty_like(x)
        max_lib.row_max(ptr(x), ptr(m), x.shape[0], x.shape[1])
        norm_lib.exp_normalise(ptr(x), ptr(m), ptr(y), x.shape[0], x.shape[1])
        return y
