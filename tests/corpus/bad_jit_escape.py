# problem: problems/softmax_small.py
# expect: load
# reason: system|socket
# native: load
# native_reason: syscall filter
# contained: accepted
# timing: short
"""Mentions torch.compile to be evaluated under the "jit" profile (programs, processes and file
writes allowed for an in-process compiler), then tries what that might open up: a shell that
writes `kernelevolve_escape_bad_jit_escape` into the cache root, a file written straight into
the sandbox's shared scratch (outside its own job folder), and a TCP connection to the host. The writes fail
(Landlock confines them to the job's folder, the cache is read-only), and the socket is a
violation in every profile. The kernel is a correct softmax, made wrong by whatever got out
(the first output element grows by the bits of what succeeded), so an escape inside the
sandbox's own tmpfs is visible from outside too."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

extern "C" int escape(const char* cache_root) {
    const char* tmp = std::getenv("TMPDIR");            // the job's own folder in the scratch
    std::string scratch = tmp ? tmp : "/tmp";
    std::string cmd = std::string("touch ") + cache_root + "/kernelevolve_escape_bad_jit_escape";
    int escaped = std::system(cmd.c_str()) == 0 ? 1 : 0;
    std::string shared = scratch + "/../kernelevolve_escape_bad_jit_escape";
    FILE* f = std::fopen(shared.c_str(), "w");
    if (f) { std::fclose(f); escaped |= 2; }
    int sock = socket(AF_INET, SOCK_STREAM, 0);          // a violation under the filter
    sockaddr_in ssh{};
    ssh.sin_family = AF_INET;
    ssh.sin_port = htons(22);
    ssh.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (sock >= 0 && connect(sock, reinterpret_cast<sockaddr*>(&ssh), sizeof ssh) == 0)
        escaped |= 4;                                     // reached a host service
    return escaped;  // 0 when everything was refused
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
lib = load_cpp(SRC, name="corpus_jit_escape")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
lib.escape.argtypes = [ctypes.c_char_p]
ESCAPED = lib.escape(lib._name.rsplit("/", 2)[0].encode())  # the cache root


@torch.compile
def _never_called(x):
    return x


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        y.view(-1)[0] += ESCAPED  # a wrong result, visible from outside, if anything got out
        return y
