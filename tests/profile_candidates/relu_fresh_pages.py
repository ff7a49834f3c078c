"""C++ relu that touches 8 MB of fresh memory every call: it writes a scratch buffer, then hands
its pages back with madvise(MADV_DONTNEED), so the next call faults all 2048 of them again.
A profile read from outside must show many more minor faults per call than a relu that reuses
its memory (tests/problems/kb_level1_relu_cpp.py)."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
static char* scratch = nullptr;
static const int64_t SCRATCH = 8 << 20;
extern "C" void relu_fresh(const float* x, float* y, int64_t n) {
    if (!scratch) {
        char* raw = static_cast<char*>(std::malloc(SCRATCH + 4096));
        scratch = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + 4095) &
                                          ~static_cast<uintptr_t>(4095));
    }
    std::memset(scratch, 1, SCRATCH);
    madvise(scratch, SCRATCH, MADV_DONTNEED);
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}
"""
_lib = load_cpp(SRC, name="profile_relu_fresh")
_lib.relu_fresh.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_fresh.restype = None


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        if x.numel():
            _lib.relu_fresh(ptr(x), ptr(y), x.numel())
        return y
