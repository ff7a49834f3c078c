# problem: problems/softmax_small.py
# expect: static
# reason: ctypes may only describe argument types
# runtime: accepted
# timing: short
"""Loads libc with ctypes.CDLL (outside load_cpp, so outside launch accounting) and calls
getpid and memcpy directly; the same door reaches any libc function (kill, ptrace, mprotect).
Here it only copies the C++ kernel's result, so at runtime it is a correct, contained kernel."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

libc = ctypes.CDLL("libc.so.6")
libc.memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
libc.memcpy.restype = ctypes.c_void_p
WORKER_PID = libc.getpid()

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
        scratch = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(scratch), x.shape[0], x.shape[1])
        y = torch.empty_like(x)
        libc.memcpy(ptr(y), ptr(scratch), scratch.numel() * scratch.element_size())
        return y
