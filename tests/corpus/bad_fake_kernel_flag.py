# problem: problems/softmax_small.py
# expect: integrity
# reason: fallback|fake kernel
"""Like bad_fake_kernel, but the result is multiplied by a scale the C++ kernel writes (1.0), so
the output depends on the kernel having run: skipping the launch leaves the scale at 0 and the
output wrong, which hides that torch.exp/sum/div do all of the real work."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cstdint>
extern "C" void softmax_scale(float* scale, int64_t rows, int64_t cols) {
    scale[0] = (rows > 0 && cols > 0) ? 1.0f : 0.0f;
}
"""
lib = load_cpp(SRC, name="corpus_softmax_scale")
lib.softmax_scale.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_scale.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        scale = torch.zeros(1)
        lib.softmax_scale(ptr(scale), x.shape[0], x.shape[1])
        e = torch.exp(x - x.amax(dim=-1, keepdim=True))
        return e / e.sum(dim=-1, keepdim=True) * scale
