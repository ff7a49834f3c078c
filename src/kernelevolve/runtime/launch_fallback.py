"""The kernel launcher's ctypes path, for where its C extension cannot be had (launch.py).

The same contract as the extension (launch_ext.cpp): the same checks, each failing with the same
exception type and wording, the launch counted through the library's own counting function (so
`stop_counting` and `suppress_launches` apply as to any ctypes call), and an out-of-range flag
of its own. It costs what the ctypes glue always cost; only the checks are new.
"""
from __future__ import annotations

import ctypes
from typing import Any


class CtypesLauncher:
    def __init__(self, lib: Any, name: str, dtypes: tuple, ints: int, flag: bool):
        self._lib, self._name, self._dtypes, self._ints, self._flag = lib, name, dtypes, ints, flag
        fn = getattr(lib, name)
        fn.argtypes = ([ctypes.c_void_p] * len(dtypes) + [ctypes.c_int64] * ints
                       + ([ctypes.c_void_p] if flag else []))
        fn.restype = None

    def __repr__(self) -> str:
        return (f"<kernel launcher {self._name} (ctypes): tensors {self._dtypes}, "
                f"{self._ints} int(s){', index flag' if self._flag else ''}>")

    def __call__(self, *args: Any) -> None:
        n, nt = len(args), len(self._dtypes)
        if n != nt + self._ints:
            raise TypeError(f"kernel {self._name} takes {nt} tensor(s) then {self._ints} int(s) "
                            f"({nt + self._ints} arguments), got {n}")
        ptrs = [self._tensor(i, t) for i, t in enumerate(args[:nt])]
        values = [self._int(nt + j, v) for j, v in enumerate(args[nt:])]
        bad = ctypes.c_int32(0)
        extra = [ctypes.addressof(bad)] if self._flag else []
        getattr(self._lib, self._name)(*ptrs, *values, *extra)  # stop_counting swaps this
        if bad.value:
            raise IndexError("index out of range in self")

    def _tensor(self, i: int, t: Any) -> int:
        import torch

        if not isinstance(t, torch.Tensor):
            raise TypeError(f"kernel {self._name}: argument {i + 1} must be a torch.Tensor, not "
                            f"{type(t).__name__}")
        want = self._dtypes[i]
        if t.dtype is not want:
            raise TypeError(f"kernel {self._name}: argument {i + 1} must be a {want} tensor, got "
                            f"{t.dtype}")
        if not t.is_cpu:
            raise ValueError(f"kernel {self._name}: argument {i + 1} must be a CPU tensor, got "
                             f"one on {t.device}")
        if not t.is_contiguous():
            raise ValueError(f"kernel {self._name}: argument {i + 1} is not contiguous; pass "
                             "t.contiguous()")
        return t.data_ptr()

    def _int(self, i: int, v: Any) -> int:
        if not isinstance(v, int):
            raise TypeError(f"kernel {self._name}: argument {i + 1} must be an int, not "
                            f"{type(v).__name__}")
        if not -(1 << 63) <= v < (1 << 63):
            raise OverflowError(f"kernel {self._name}: argument {i + 1} does not fit in int64")
        return v


class CtypesElementwise(CtypesLauncher):
    """launch.elementwise_launcher's ctypes path: inputs only; outputs allocated like the domain."""

    def __init__(self, lib: Any, name: str, dtypes: tuple, outs: tuple, domain: int):
        super().__init__(lib, name, dtypes + outs, 1, False)
        self._nin, self._domain = len(dtypes), domain

    def __call__(self, *args: Any) -> Any:
        import torch

        if len(args) != self._nin:
            raise TypeError(f"kernel {self._name} takes {self._nin} input tensor(s), got "
                            f"{len(args)}")
        for i, t in enumerate(args):
            self._tensor(i, t.contiguous() if isinstance(t, torch.Tensor) else t)
        ins = [t.contiguous() for t in args]
        dom = ins[self._domain]
        outs = [torch.empty_like(dom, dtype=d) for d in self._dtypes[self._nin:]]
        if dom.numel():
            super().__call__(*ins, *outs, dom.numel())
        return outs[0] if len(outs) == 1 else tuple(outs)
