"""C++ candidate for kb_level2_linear_swish_scale.py: keep the matmul, fuse the epilogue.

`nn.Linear` stays a torch call (its GEMM is already a tuned library kernel), built in __init__
exactly as Model builds it so that the harness's seeded initialisation gives both the same
weights. The swish and the division, two extra passes in eager, become one in-place pass.
"""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void swish_div(float* y, int64_t n, float divisor) {
    #pragma omp parallel for if(n > 65536)
    for (int64_t i = 0; i < n; ++i) {
        const float v = y[i];
        y[i] = v / (1.0f + std::exp(-v)) / divisor;
    }
}
"""
_lib = load_cpp(SRC, name="kb_swish_div")
_lib.swish_div.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_float]
_lib.swish_div.restype = None


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, divisor):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.divisor = divisor

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x).contiguous()
        if y.numel():
            _lib.swish_div(ptr(y), y.numel(), float(self.divisor))
        return y
