"""Right outputs only if nothing of the Ray cluster is visible from the worker."""
import ctypes
import os
from pathlib import Path

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

_lib = load_cpp(r"""
#include <cstdint>
extern "C" void scale_shift(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * 3.0f + 0.5f;
}
""", name="sees_ray")
_lib.scale_shift.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]


def _visible():
    seen = [str(d) for d in (Path("/tmp/ray"), Path.home() / ".ray")
            if d.is_dir() and any(d.iterdir())]
    return seen + sorted(k for k in os.environ if k.startswith("RAY_"))


class ModelNew(nn.Module):
    def forward(self, x):
        seen = _visible()
        if seen:
            raise RuntimeError(f"the cluster is visible: {seen}")
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.scale_shift(ptr(x), ptr(y), x.numel())
        return y
