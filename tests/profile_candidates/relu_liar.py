"""The fresh-pages relu, lying about itself in every way its own process can (the test runs it
with the static rules off): it renames its main thread to ") R 9 9 9 9 9 9", which shifts every
field of /proc/<pid>/stat for a parser that splits on spaces, and replaces getrusage and
os.times with fakes that report no work and no faults. The profile is read from outside, by the
coordinator, from the kernel's own records: none of this changes it."""
import ctypes
import os
import resource

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

ctypes.CDLL(None).prctl(15, b") R 9 9 9 9 9 9", 0, 0, 0)  # PR_SET_NAME
_NOTHING = resource.struct_rusage((0.0, 0.0) + (0,) * 14)
resource.getrusage = lambda who: _NOTHING
os.times = lambda: os.times_result((0.0,) * 5)

SRC = r"""
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
static char* scratch = nullptr;
static const int64_t SCRATCH = 8 << 20;
extern "C" void relu_liar(const float* x, float* y, int64_t n) {
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
_lib = load_cpp(SRC, name="profile_relu_liar")
_lib.relu_liar.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu_liar.restype = None


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        if x.numel():
            _lib.relu_liar(ptr(x), ptr(y), x.numel())
        return y
