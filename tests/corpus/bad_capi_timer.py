# problem: problems/softmax_small.py
# expect: load
# reason: PyRun_SimpleString
# native: accepted
"""C++ calling the Python C API to rewrite the measurement: at import it runs Python inside the
worker that wraps the harness's timing loop and divides every candidate sample by 40 (accepted
at 66x for a 1.7x kernel, seen). Library inspection refuses the C-API import; with inspection
off (`native`), the kernel is accepted at its real speed, because no clock that decides the
verdict runs in the candidate's process (the test checks the speedup against the same kernel
without the patch)."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>

extern "C" {
int PyGILState_Ensure(void);
void PyGILState_Release(int);
int PyRun_SimpleString(const char*);
}

static const char* PATCH = R"PY(
import sys
for name in ("kernelevolve.harness.worker.jobs", "kernelevolve.harness.protocol.timing",
             "kernelevolve.harness.worker.measure"):
    mod = sys.modules.get(name)
    if mod is None or not hasattr(mod, "interleaved"):
        continue
    real = mod.interleaved
    def faster(fns, sets, timer, policy, _real=real):
        samples = _real(fns, sets, timer, policy)
        samples[1] = [s / 40 for s in samples[1]]
        return samples
    mod.interleaved = faster
)PY";

extern "C" int patch_timing() {
    int state = PyGILState_Ensure();
    int rc = PyRun_SimpleString(PATCH);
    PyGILState_Release(state);
    return rc;
}

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
lib = load_cpp(SRC, name="corpus_capi_timer")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
PATCHED = lib.patch_timing()


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
