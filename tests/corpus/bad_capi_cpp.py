# problem: problems/softmax_small.py
# expect: load
# reason: PyRun_SimpleString
# native: load|run
# native_reason: syscall filter
# contained: accepted|load|run
# timing: short
"""C++ calling the Python C API: the kernel library declares `PyGILState_Ensure` and
`PyRun_SimpleString` itself (the static gate never reads C++ strings) and runs Python inside the
worker: here `os.system`, which starts a shell that leaves `kernelevolve_escape_bad_capi_cpp` in
the cache root. The same door rewrites any of the worker's own Python (the measurement issue
deals with what that does to verdicts; containment keeps it inside its own process). The kernel
is a correct softmax.
Stopped by: library inspection (Python C-API symbols), the syscall filter (no exec, no new
processes), and a read-only view of everything outside the job."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <string>
#include <dlfcn.h>

extern "C" {
int PyGILState_Ensure(void);
void PyGILState_Release(int);
int PyRun_SimpleString(const char*);
}

static std::string cache_root() {
    Dl_info info;
    dladdr(reinterpret_cast<void*>(&cache_root), &info);
    std::string p = info.dli_fname ? info.dli_fname : "/nonexistent/x/y";
    p = p.substr(0, p.rfind('/'));
    return p.substr(0, p.rfind('/'));
}

extern "C" int run_python() {
    std::string code = "import os\nos.system('touch " + cache_root() +
                       "/kernelevolve_escape_bad_capi_cpp')\n";
    int state = PyGILState_Ensure();
    int rc = PyRun_SimpleString(code.c_str());
    PyGILState_Release(state);
    return rc;
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
lib = load_cpp(SRC, name="corpus_capi_cpp")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
RAN = lib.run_python()


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
