# problem: problems/softmax_small.py
# expect: correctness|integrity
# reason: wrong result
"""The C++ kernel computes each row into a thread-local scratch row and never copies it to the
output, so forward returns the uninitialised torch.empty_like buffer."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <vector>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel if(rows * cols > 32768)
    {
        std::vector<float> row(cols);
        #pragma omp for
        for (int64_t r = 0; r < rows; ++r) {
            const float* xr = x + r * cols;
            float m = -INFINITY;
            for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
            double s = 0.0;
            for (int64_t c = 0; c < cols; ++c) { row[c] = std::exp(xr[c] - m); s += row[c]; }
            const float inv = static_cast<float>(1.0 / s);
            for (int64_t c = 0; c < cols; ++c) row[c] *= inv;
            // BUG: the row is never copied to y + r * cols
        }
    }
}
"""
lib = load_cpp(SRC, name="corpus_softmax_scratch")
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
