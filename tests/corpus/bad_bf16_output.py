# problem: problems/softmax_small.py
# expect: correctness
# reason: dtype
"""Writes the output as bfloat16 from the C++ kernel to halve the bytes stored, and returns it
as a bfloat16 tensor where the reference returns float32."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
static inline uint16_t float_to_bf16(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    bits += 0x7FFF + ((bits >> 16) & 1);  // round to nearest even
    return static_cast<uint16_t>(bits >> 16);
}
extern "C" void softmax_rows_bf16_out(const float* x, uint16_t* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        uint16_t* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += std::exp(xr[c] - m);
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] = float_to_bf16(std::exp(xr[c] - m) * inv);
    }
}
"""
lib = load_cpp(SRC, name="corpus_softmax_bf16_out")
lib.softmax_rows_bf16_out.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int64]
lib.softmax_rows_bf16_out.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty(x.shape, dtype=torch.bfloat16)
        lib.softmax_rows_bf16_out(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
