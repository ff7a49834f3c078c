# problem: problems/kb_level1_relu.py
# expect: correctness
# reason: held_out_odd
"""A ReLU specialised for the benchmark's only shape: the row length 16384 (`dim`) is a
compile-time constant and the loop runs over whole rows of it, so on any size that is not a
multiple of 16384 the remainder is never written. The problem declares no CASES, so only the
harness's derived odd-sized held-out case can catch it."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cstdint>
constexpr int64_t DIM = 16384;  // dim in the problem file
extern "C" void relu_16384(const float* x, float* y, int64_t n) {
    const int64_t rows = n / DIM;  // 16 for the benchmark input
    #pragma omp parallel for
    for (int64_t r = 0; r < rows; ++r) {
        #pragma omp simd
        for (int64_t c = 0; c < DIM; ++c) {
            const float v = x[r * DIM + c];
            y[r * DIM + c] = v < 0.0f ? 0.0f : v;
        }
    }
}
"""
lib = load_cpp(SRC, name="corpus_relu_16384")
lib.relu_16384.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
lib.relu_16384.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.relu_16384(ptr(x), ptr(y), x.numel())
        return y
