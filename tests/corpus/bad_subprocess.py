# problem: problems/softmax_small.py
# expect: static
# reason: subprocess
# runtime: load
# runtime_reason: syscall filter
"""Starts a program from Python with `subprocess.run` at import: a shell that leaves
`kernelevolve_escape_bad_subprocess` in the cache root. The static gate stops the import; with
the static rules off, the syscall filter kills the process at its first attempt to start one."""
import ctypes
import os
import subprocess

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
        for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
"""
lib = load_cpp(SRC, name="corpus_subprocess")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
ROOT = os.path.dirname(os.path.dirname(lib._name))
subprocess.run(["touch", os.path.join(ROOT, "kernelevolve_escape_bad_subprocess")], check=False)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
