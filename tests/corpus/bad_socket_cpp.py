# problem: problems/softmax_small.py
# expect: load
# reason: socket
# native: load|run
# native_reason: syscall filter
# contained: accepted
# timing: short
"""Opens sockets from C++: a unix socket bound at `kernelevolve_escape_bad_socket_cpp` in the cache
root (a rendezvous any process on the host can connect to; a network namespace does not cover
path-bound sockets) and a TCP connection attempt to 127.0.0.1:22. The kernel is a correct
softmax.
Stopped by: library inspection (socket, bind, connect), the syscall filter (no sockets), the
network namespace and the read-only cache."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static std::string cache_root() {
    Dl_info info;
    dladdr(reinterpret_cast<void*>(&cache_root), &info);
    std::string p = info.dli_fname ? info.dli_fname : "/nonexistent/x/y";
    p = p.substr(0, p.rfind('/'));
    return p.substr(0, p.rfind('/'));
}

extern "C" int open_sockets() {
    int ok = 0;
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    if (u >= 0) {
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::string path = cache_root() + "/kernelevolve_escape_bad_socket_cpp";
        std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
        if (bind(u, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) ok |= 1;
    }
    int t = socket(AF_INET, SOCK_STREAM, 0);
    if (t >= 0) {
        sockaddr_in in{};
        in.sin_family = AF_INET;
        in.sin_port = htons(22);
        in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(t, reinterpret_cast<sockaddr*>(&in), sizeof in) == 0) ok |= 2;
        close(t);
    }
    return ok;
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
lib = load_cpp(SRC, name="corpus_socket_cpp")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
OPENED = lib.open_sockets()


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
