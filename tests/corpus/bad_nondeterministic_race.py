# problem: problems/softmax_small.py
# expect: correctness|integrity
# reason: wrong result|native thread
"""Splits each row's sum across OpenMP threads but combines the partial sums with a plain store
instead of a reduction: the row is normalised by whichever thread's partial sum landed last,
so the result is wrong and changes from run to run."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        #pragma omp parallel num_threads(4)
        {
            double part = 0.0;
            #pragma omp for
            for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(xr[c] - m); part += yr[c]; }
            s = part;  // BUG: should be a reduction (or `#pragma omp atomic` s += part)
        }
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
"""
lib = load_cpp(SRC, name="corpus_softmax_race")
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
