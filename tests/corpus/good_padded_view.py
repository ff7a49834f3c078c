# problem: problems/synth_mean_last.py
# expect: accepted
"""Honest, with outputs that are views of a padded buffer: each row's mean and variance are
written into one 64-byte slot per row (16 floats: two threads never share a cache line), and
forward returns `buf[:, 0]` and `buf[:, 1:2]`, strided views of it, as the reference's shapes
ask. Seen before the fix: it passed the check job and was then rejected at correctness, "the
output of call 1 could not be read from the candidate's memory" (the outside reader refused any
output spread over more than 4x its elements)."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SLOT = 16  # floats per row: one cache line

lib = load_cpp(r"""
#include <cstdint>
extern "C" void mean_var_rows(const float* x, float* out, int64_t rows, int64_t cols,
                              int64_t slot) {
    #pragma omp parallel for if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) s += xr[c];
        const double mean = s / cols;
        double q = 0.0;
        for (int64_t c = 0; c < cols; ++c) { const double d = xr[c] - mean; q += d * d; }
        out[r * slot] = static_cast<float>(mean);
        out[r * slot + 1] = static_cast<float>(q / (cols - 1));
    }
}
""", name="corpus_padded_view")
lib.mean_var_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                              ctypes.c_int64]
lib.mean_var_rows.restype = None


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        buf = torch.empty(x.shape[0], SLOT, dtype=x.dtype)
        lib.mean_var_rows(ptr(x), ptr(buf), x.shape[0], x.shape[1], SLOT)
        return buf[:, 0], buf[:, 1:2]
