# problem: problems/softmax_small.py
# expect: static
# reason: environment
# runtime: accepted
# timing: short
"""Reads API keys from the environment and leaks their length through the output, nudging one
element by len(key) * 1e-9 (far below the tolerance, but visible in the reported max abs error).
Accepted at runtime only because it is contained: the worker's environment has no secrets, so
the nudge is zero."""
import ctypes
import os

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

_KEY = (os.environ.get("OPENAI_API_KEY") or os.environ.get("ANTHROPIC_API_KEY")
        or os.environ.get("HF_TOKEN") or "")

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

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        if _KEY:
            y.view(-1)[0] += len(_KEY) * 1e-9
        return y
