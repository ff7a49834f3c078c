# problem: problems/big_outputs.py
# expect: correctness
# reason: wrong result at timed call
"""Lies only where nobody used to look: the outside measurement read the outputs of timed calls
until 64 MiB per case had been checked, then kept timing unchecked. This kernel counts the calls
made on each input buffer the harness keeps across batches (the timed input sets: their storage
is a fixed mapping, not the allocator's) and computes every row for the first four (two warm-up
batches, then the two that were sampled for a 32 MiB output); after that it writes one row in
eight and leaves the rest as the fresh pages' zeros. The check job's calls are all honest. Seen
before the fix: accepted, with the lying calls timed and never checked (each one logged to
stderr). The kernel itself is a correct one-thread outer product, slower than eager."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

lib = load_cpp(r"""
#include <cstdint>
extern "C" void outer_rows(const float* a, const float* b, float* y, int64_t rows,
                           int64_t cols, int64_t step) {
    for (int64_t r = 0; r < rows; r += step)
        for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = a[r] * b[c];
}
""", name="corpus_output_size_liar")
lib.outer_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                           ctypes.c_int64, ctypes.c_int64]
lib.outer_rows.restype = None

HONEST_USES = 4
uses = {}


class ModelNew(nn.Module):
    def forward(self, a, b):
        step = 1
        if not a.untyped_storage().resizable():  # a timed input set, kept across batches
            key = a.data_ptr()
            uses[key] = uses.get(key, 0) + 1
            if uses[key] > HONEST_USES:
                step = 8
                print(f"unchecked call: buffer use {uses[key]}, one row in eight written")
        y = torch.empty(a.shape[0], b.shape[0], dtype=a.dtype)
        lib.outer_rows(ptr(a.contiguous()), ptr(b.contiguous()), ptr(y), a.shape[0],
                       b.shape[0], step)
        return y
