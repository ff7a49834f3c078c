# problem: problems/softmax_small.py
# expect: correctness|integrity
# reason: wrong result
"""A "graph replay" optimisation gone wrong: the first call captures a static input and output
buffer; later calls replay the C++ kernel on the captured input without copying the new x into
it, so every call returns the result for the first input."""
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
"""
lib = load_cpp(SRC, name="corpus_softmax")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.static_x = None
        self.static_y = None

    def forward(self, x):
        if self.static_x is None or self.static_x.shape != x.shape:
            self.static_x = x.contiguous().clone()
            self.static_y = torch.empty_like(self.static_x)
        # BUG: missing self.static_x.copy_(x) before the replay
        lib.softmax_rows(ptr(self.static_x), ptr(self.static_y), x.shape[0], x.shape[1])
        return self.static_y
