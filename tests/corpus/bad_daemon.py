# problem: problems/softmax_small.py
# expect: load
# reason: fork|setsid
# native: load|run
# native_reason: syscall filter
# contained: accepted
# timing: short
"""Double-forks and `setsid`s a daemon (named `ke_daemon`) at import: it leaves the job's process
group and session, so killing the group misses it, and it lives on after its job ends (until the
pool closes), free to watch or disturb the evaluations that follow. The kernel is a correct
softmax.
Stopped by: library inspection (fork, setsid), the syscall filter (no new processes), and the
worker killing every process of a finished job, whatever it did to its session or group."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" int start_daemon() {
    pid_t first = fork();
    if (first < 0) return -1;
    if (first == 0) {
        setsid();
        if (fork() == 0) {
            prctl(PR_SET_NAME, "ke_daemon", 0, 0, 0);
            for (int i = 0; i < 600; ++i) sleep(1);
        }
        _exit(0);
    }
    int status = 0;
    waitpid(first, &status, 0);
    return 1;
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
lib = load_cpp(SRC, name="corpus_daemon")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
STARTED = lib.start_daemon()


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
