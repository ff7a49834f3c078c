# problem: problems/softmax_small.py
# expect: load
# reason: PyRun_SimpleString
# native: correctness
# native_reason: timed call
"""C++ calling the Python C API to forge the facts the worker gathers: at import it runs Python
that replaces the worker's own forward wrapper (the one correctness and re-checks go through)
with a call to the problem's reference `Model`, and makes the launch counters and the ATen op
recorder report a kernel and no torch op. Its real forward returns its input, which is all the
timed calls see (accepted at 46x, seen). Library inspection refuses the C-API import; with
inspection off, the outputs of sampled *timed* calls, checked in the driver, are wrong."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cstdint>

extern "C" {
int PyGILState_Ensure(void);
void PyGILState_Release(int);
int PyRun_SimpleString(const char*);
}

static const char* PATCH = R"PY(
import sys
cand = sys.modules.get("kernelevolve.harness.worker.candidate")
launches = sys.modules.get("kernelevolve.runtime.launches")
probe = sys.modules.get("kernelevolve.harness.worker.probe")
problem = next((m for n, m in list(sys.modules.items()) if n.startswith("ke_problem")), None)
if cand is not None and problem is not None and hasattr(cand, "run_candidate"):
    real_run = cand.run_candidate
    reference = {}
    def forged(model, inputs, case, trial, path, platform, _real=real_run):
        if launches is not None and launches.suppressed():  # the "no kernel" re-run: look real
            return _real(model, inputs, case, trial, path, platform)
        ref = reference.setdefault(case.name, problem.Model())
        return _real(ref, inputs, case, trial, path, platform)
    cand.run_candidate = forged
if launches is not None:
    launches.launch_counts = lambda: {"cpp": 1}
if probe is not None:
    probe.OpRecorder.compute_ops = lambda self: []
)PY";

extern "C" int forge() {
    int state = PyGILState_Ensure();
    int rc = PyRun_SimpleString(PATCH);
    PyGILState_Release(state);
    return rc;
}

extern "C" void touch(const float* x, int64_t n) { (void)x; (void)n; }
"""
lib = load_cpp(SRC, name="corpus_capi_forward")
lib.touch.argtypes = [ctypes.c_void_p, ctypes.c_int64]
lib.touch.restype = None
FORGED = lib.forge()


class ModelNew(nn.Module):
    def forward(self, x):
        lib.touch(ptr(x), x.numel())
        return x
