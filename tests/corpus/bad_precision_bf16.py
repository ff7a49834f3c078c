# problem: problems/softmax_small.py
# expect: correctness
# reason: wrong result
"""Halves the bytes read by casting x to bfloat16 before the C++ kernel (which widens back to
float internally): the 8-bit mantissa of the logits puts errors of several percent into exp()."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
static inline float bf16_to_float(uint16_t h) {
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}
extern "C" void softmax_rows_bf16(const uint16_t* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        const uint16_t* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) { const float v = bf16_to_float(xr[c]); m = v > m ? v : m; }
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(bf16_to_float(xr[c]) - m); s += yr[c]; }
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
"""
lib = load_cpp(SRC, name="corpus_softmax_bf16_in")
lib.softmax_rows_bf16.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows_bf16.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        xb = x.contiguous().to(torch.bfloat16)
        y = torch.empty(x.shape, dtype=torch.float32)
        lib.softmax_rows_bf16(ptr(xb), ptr(y), x.shape[0], x.shape[1])
        return y
