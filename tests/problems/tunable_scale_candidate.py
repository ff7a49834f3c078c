"""C++ candidate for tunable_scale.py whose best tune configuration is known: REPEAT = 1.

The kernel computes y = x * 3 + 0.5 in one pass, REPEAT times over. Every pass writes the same
values (idempotent), and an empty `asm volatile` with a memory clobber between passes tells g++
that memory may be read there, so it cannot drop the earlier passes' stores: the run time grows
linearly with REPEAT and REPEAT = 1 is the fastest configuration. CHUNK only splits the loop
into blocks (harmless, either value is fine). The seed starts at REPEAT = 64, a slow kernel.
"""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

REPEAT = 64
CHUNK = 4096
TUNABLES = {"REPEAT": [1, 8, 32, 64], "CHUNK": [4096, 65536]}

SRC = r"""
#include <cstdint>
extern "C" void scale_shift(const float* x, float* y, int64_t n) {
    for (int rep = 0; rep < REPEAT; ++rep) {
        for (int64_t start = 0; start < n; start += CHUNK) {
            const int64_t end = start + CHUNK < n ? start + CHUNK : n;
            #pragma omp simd
            for (int64_t i = start; i < end; ++i) {
                y[i] = x[i] * 3.0f + 0.5f;
            }
        }
        asm volatile("" : : "r"(y) : "memory");
    }
}
"""
_lib = load_cpp(f"#define REPEAT {REPEAT}\n#define CHUNK {CHUNK}\n" + SRC, name="tunable_scale")
_lib.scale_shift.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.scale_shift.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        if x.numel():
            _lib.scale_shift(ptr(x), ptr(y), x.numel())
        return y
