# problem: softmax
# expect: accepted
"""A C++ row maximum followed by a torch.compile'd epilogue (exp, sum, divide). torch.compile runs
inductor inside the candidate's own process at the first call, which execs g++ and writes its
cache even when warm: the job runs under the syscall filter's "jit" profile, with Landlock
confining every write to the job's own folder."""
import ctypes
import torch
import torch.nn as nn
from kernelevolve.runtime import load_cpp, ptr

lib = load_cpp(r"""
#include <cmath>
#include <cstdint>
extern "C" void row_max(const float* x, float* m, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        float best = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) best = x[r * cols + c] > best ? x[r * cols + c] : best;
        m[r] = best;
    }
}
""", name="compiled_epilogue_max")
lib.row_max.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]


@torch.compile
def _epilogue(x, m):
    e = torch.exp(x - m[:, None])
    return e / e.sum(dim=-1, keepdim=True)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        m = torch.empty(x.shape[0])
        lib.row_max(ptr(x), ptr(m), x.shape[0], x.shape[1])
        return _epilogue(x, m)
