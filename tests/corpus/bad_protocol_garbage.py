# problem: problems/softmax_small.py
# expect: load
# reason: write
# native: load
# native_reason: malformed control message
# contained: load
# contained_reason: malformed control message
"""Writes garbage to every descriptor it inherited (3 to 255): in a worker whose job children
inherit the server-to-driver protocol channel, the driver reads a line that is not JSON and dies
with a JSONDecodeError traceback. `write` on inherited descriptors is not a violation: a
contained job holds only its own pipes, its result file and its control socket to the worker
server, so the garbage reaches the server, which rejects the job for a malformed control
message; the driver never parses a byte of it. The kernel is a
correct softmax; library inspection refuses it early (raw `write`)."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <unistd.h>

extern "C" int spray() {
    static const char junk[] = "{\"id\": \x01\xff not json at all\n}\n";
    int hit = 0;
    for (int fd = 3; fd < 256; ++fd)
        if (write(fd, junk, sizeof junk - 1) > 0) ++hit;
    return hit;
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
lib = load_cpp(SRC, name="corpus_protocol_garbage")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
SPRAYED = lib.spray()


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
