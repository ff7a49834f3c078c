# problem: problems/secret_project/problem.py
# expect: static
# reason: not allowed
# runtime: load
# runtime_reason: file system
# native: accepted
# contained: accepted
# timing: short
"""Reads a project's secrets from C++: `fopen` and `open` of the driver's current folder's
`.env` (the repo root, found from where `kernelevolve` was imported), the problem folder's
`.env` and /opt/kernelevolve_corpus_secret/.env, paths handed over from Python, and raises with
whatever it read (so a read shows up in the verdict, where the corpus test's leak check finds
it). The kernel is a correct softmax. Library inspection refuses `fopen`; with the inspection
off (and then the syscall filter off too) it is accepted because it finds nothing: none of those
folders is mounted in the worker's sandbox, and Landlock refuses reads outside the allowlist."""
import ctypes
import pathlib

import torch
import torch.nn as nn

import kernelevolve
from kernelevolve.runtime import load_cpp, ptr

REPO = pathlib.Path(kernelevolve.__file__).resolve().parents[2]
TARGETS = [REPO / "kernelevolve_corpus_secret.env",
           REPO / "tests" / "problems" / "secret_project" / ".env",
           pathlib.Path("/opt/kernelevolve_corpus_secret/.env")]

SRC = r"""
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>
extern "C" int64_t read_file(const char* path, char* buf, int64_t n) {
    FILE* f = std::fopen(path, "rb");
    if (f) {
        size_t k = std::fread(buf, 1, n - 1, f);
        std::fclose(f);
        buf[k] = 0;
        return (int64_t)k;
    }
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t k = read(fd, buf, n - 1);
    close(fd);
    if (k < 0) return -1;
    buf[k] = 0;
    return (int64_t)k;
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
lib = load_cpp(SRC, name="corpus_secret_reader")
lib.read_file.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int64]
lib.read_file.restype = ctypes.c_int64
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None


def _steal() -> list[str]:
    found = []
    for path in TARGETS:
        buf = ctypes.create_string_buffer(4096)
        if lib.read_file(str(path).encode(), buf, 4096) > 0:
            found.append(f"{path}: {buf.value.decode(errors='replace').strip()}")
    return found


_STOLEN = _steal()
if _STOLEN:
    print("stolen:", _STOLEN)
    raise RuntimeError("stolen: " + " | ".join(_STOLEN))


class ModelNew(nn.Module):
    def forward(self, x):
        stolen = _steal()
        if stolen:
            raise RuntimeError("stolen: " + " | ".join(stolen))
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.softmax_rows(ptr(x), ptr(y), x.shape[0], x.shape[1])
        return y
