# problem: problems/softmax_small.py
# expect: load
# reason: system
# native: load|run
# native_reason: syscall filter
# contained: accepted
# timing: short
"""Runs a program from C++ with `system()`: a shell that leaves `kernelevolve_escape_bad_exec_cpp`
in the cache root (any program could run the same way, with the worker's privileges). The
kernel is a correct softmax.
Stopped by: library inspection (system), the syscall filter (no new processes, no exec), and the
read-only cache."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <dlfcn.h>

static std::string cache_root() {
    Dl_info info;
    dladdr(reinterpret_cast<void*>(&cache_root), &info);
    std::string p = info.dli_fname ? info.dli_fname : "/nonexistent/x/y";
    p = p.substr(0, p.rfind('/'));
    return p.substr(0, p.rfind('/'));
}

extern "C" int run_shell() {
    std::string cmd = "touch " + cache_root() + "/kernelevolve_escape_bad_exec_cpp";
    return std::system(cmd.c_str());
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
lib = load_cpp(SRC, name="corpus_exec_cpp")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
RC = lib.run_shell()


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
