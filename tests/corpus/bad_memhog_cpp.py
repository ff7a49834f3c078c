# problem: problems/softmax_small.py
# expect: run
# reason: SIG|time limit
"""C++ kernel mallocs and touches memory until malloc fails, then writes through NULL."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cstdint>
#include <cstdlib>
#include <cstring>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (;;) {
        char* p = static_cast<char*>(std::malloc(256 << 20));
        std::memset(p, 1, 256 << 20);  // p is NULL once the limit is reached
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
        return y
