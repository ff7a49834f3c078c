# problem: problems/softmax_small.py
# expect: accepted
# timing: short
"""A C++ kernel (row maximum, then exp(x - max)) followed by a torch.compile'd epilogue that
normalises each row. torch.compile runs inductor inside the candidate's own process, which execs
g++ and writes its cache even when warm: the job runs under the syscall filter's "jit" profile,
with Landlock confining every write to the job's own folder. It compiles in __init__, for
dynamic shapes, so inductor's ~10 s runs in the `load` stage and not in the first forward."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
extern "C" void exp_shifted(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        float best = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) best = x[r * cols + c] > best ? x[r * cols + c] : best;
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = std::exp(x[r * cols + c] - best);
    }
}
""", name="compiled_epilogue_exp")
lib.exp_shifted.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]


@torch.compile(dynamic=True)
def _normalise(e):
    return e / e.sum(dim=-1, keepdim=True)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        _normalise(torch.rand(3, 5))  # compile now, for every shape at once

    def forward(self, x):
        x = x.contiguous()
        e = torch.empty_like(x)
        lib.exp_shifted(ptr(x), ptr(e), x.shape[0], x.shape[1])
        return _normalise(e)
