# problem: problems/softmax_small.py
# expect: load
# reason: mkfifo|unlink
# native: load|run
# native_reason: syscall filter
# contained: accepted
# timing: short
"""Replaces its job's `stderr.log` with a FIFO: a driver that opens the job's log by path blocks
forever waiting for a writer, and the whole run hangs. The kernel is a correct softmax.
Stopped by: library inspection (mkfifo, unlink), the syscall filter (no file creation), and a
driver that opens no worker file by path (it reads pipes and its own descriptors, never
blocking)."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <sys/stat.h>
#include <unistd.h>

extern "C" int fifo_logs() {
    int done = 0;
    if (unlink("stderr.log") == 0 && mkfifo("stderr.log", 0600) == 0) ++done;
    return done;
}

extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
"""
lib = load_cpp(SRC, name="corpus_log_fifo")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
FIFOS = lib.fifo_logs()


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
