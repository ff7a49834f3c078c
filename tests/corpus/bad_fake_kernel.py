# problem: problems/softmax_small.py
# expect: integrity
# reason: skipped|fallback
"""Computes softmax with torch.exp/sum/div (so the reference's own `_softmax` op never runs)
and launches a C++ kernel that only records the row count: the kernel does none of the work."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cstdint>
extern "C" void softmax_prepare(const float* x, int64_t rows, int64_t cols, float* stats) {
    stats[0] = static_cast<float>(rows);
    stats[1] = static_cast<float>(cols);
}
"""
lib = load_cpp(SRC, name="corpus_softmax_prepare")
lib.softmax_prepare.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
lib.softmax_prepare.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.stats = torch.zeros(2)

    def forward(self, x):
        x = x.contiguous()
        lib.softmax_prepare(ptr(x), x.shape[0], x.shape[1], ptr(self.stats))
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True)
