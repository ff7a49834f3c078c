"""C++ candidate for kb_level1_relu.py: an OpenMP loop over the flattened tensor.

`v < 0 ? 0 : v` rather than `v > 0 ? v : 0`, so NaN passes through as torch.relu does.
"""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd if(n > 65536)
    for (int64_t i = 0; i < n; ++i) {
        const float v = x[i];
        y[i] = v < 0.0f ? 0.0f : v;
    }
}
"""
_lib = load_cpp(SRC, name="kb_relu")
_lib.relu.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.relu.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        if x.numel():
            _lib.relu(ptr(x), ptr(y), x.numel())
        return y
