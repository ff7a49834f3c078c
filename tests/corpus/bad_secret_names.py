# problem: problems/softmax_small.py
# expect: load
# reason: fopen
# native: accepted
# contained: accepted
# timing: short
"""Reads secrets whose variable names match no scrub pattern (DATABASE_URL, *_PASS, SENTRY_DSN,
SLACK_WEBHOOK_URL, a made-up name) with `getenv`, and dumps `/proc/self/environ` and
`/proc/1/environ` too, printing all of it: what a worker prints travels back as the result's
logs, into the JSON, the store and the next LLM prompt. Library inspection stops it early (fopen);
without inspection it runs, and reading its own environment is allowed: it is accepted because
the environment it gets is built from an allowlist, so there is nothing to leak (the test checks
from outside that no secret value appears in any output, file or prompt)."""
import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

static void dump(const char* path) {
    FILE* f = std::fopen(path, "rb");
    if (!f) return;
    int c;
    while ((c = std::fgetc(f)) != EOF) std::putchar(c ? c : '\n');
    std::fclose(f);
}

extern "C" int leak() {
    static const char* names[] = {"DATABASE_URL", "KE_DB_PASS", "SENTRY_DSN",
                                  "SLACK_WEBHOOK_URL", "KE_INNOCENT_LOOKING", nullptr};
    for (int i = 0; names[i]; ++i) {
        const char* v = std::getenv(names[i]);
        std::printf("%s=%s\n", names[i], v ? v : "");
        std::fprintf(stderr, "%s=%s\n", names[i], v ? v : "");
    }
    dump("/proc/self/environ");
    dump("/proc/1/environ");
    std::fflush(stdout);
    return 0;
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
lib = load_cpp(SRC, name="corpus_secret_names")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None
lib.leak()


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
