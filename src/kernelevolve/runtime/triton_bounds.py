"""Bounds checking for the Triton interpreter: every load, store and atomic of a launch must
address whole elements inside the storage of one of the launch's tensor arguments.

The interpreter reads and writes raw host addresses unchecked (a small over-read returns
garbage, an over-write corrupts the heap). `triton_guard.install()` patches the hooks below
into `GridExecutor` and `InterpreterBuilder`; the check runs before memory is touched and
raises `TritonOutOfBoundsError` with a one-line, prompt-ready message.
"""
from __future__ import annotations

import linecache
import os
import sys
import threading
from dataclasses import dataclass

import numpy as np

_tls = threading.local()


class TritonOutOfBoundsError(RuntimeError):
    """A Triton kernel touched memory outside every tensor argument (interpreter only)."""

    def __init__(self, message: str, kernel: str = "", op: str = "", lanes: int = 0):
        super().__init__(message)
        self.kernel = kernel
        self.op = op
        self.lanes = lanes

    def __reduce__(self):
        return (type(self), (str(self), self.kernel, self.op, self.lanes))


# --------------------------------------------------------------------------- interpreter bounds

@dataclass
class _Launch:
    kernel: str
    names: list | None = None  # region i belongs to argument names[i]
    lo: np.ndarray | None = None  # int64 start addresses, sorted
    hi: np.ndarray | None = None  # int64 end addresses (exclusive)


def _launch_stack() -> list:
    stack = getattr(_tls, "launches", None)
    if stack is None:
        stack = _tls.launches = []
    return stack


def _grid_call(original):
    def __call__(self, *args, **kwargs):
        fn = getattr(self, "fn", None)
        launch = _Launch(kernel=getattr(fn, "__name__", "<kernel>"))
        if "_init_args_hst" not in type(self).__dict__:
            # Older/newer interpreter without the host-copy step: the arguments are what it reads
            # (true for CPU tensors, the only ones an interpreter without a GPU sees).
            _set_regions(launch, getattr(self, "arg_names", []), args, kwargs)
        stack = _launch_stack()
        stack.append(launch)
        try:
            return original(self, *args, **kwargs)
        except Exception as exc:
            oob = _find_oob(exc)
            if oob is None or oob is exc:
                raise
            raise oob from None  # the interpreter wraps it in InterpreterError(repr(e))
        finally:
            stack.pop()
    return __call__


def _capture_host_args(original):
    def _init_args_hst(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        stack = _launch_stack()
        if stack and stack[-1].lo is None:
            try:
                args_hst, kwargs_hst = result
                _set_regions(stack[-1], getattr(self, "arg_names", []), args_hst, kwargs_hst)
            except Exception:
                stack[-1].lo = None  # unknown layout: skip checks rather than false alarms
        return result
    return _init_args_hst


def _find_oob(exc):
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, TritonOutOfBoundsError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _set_regions(launch: _Launch, arg_names, args, kwargs) -> None:
    regions: dict[int, tuple[int, str]] = {}
    unknown = []

    def visit(name, value):
        if isinstance(value, (tuple, list)):
            for i, item in enumerate(value):
                visit(f"{name}[{i}]", item)
        elif hasattr(value, "block_shape") and hasattr(value, "base"):  # TensorDescriptor
            visit(f"{name}.base", value.base)
        elif hasattr(value, "data_ptr"):
            extent = _storage_extent(value)
            if extent is None:
                unknown.append(name)
                return
            lo, nbytes = extent
            if lo not in regions or regions[lo][0] < nbytes:
                regions[lo] = (nbytes, name)

    for i, value in enumerate(args):
        visit(arg_names[i] if i < len(arg_names) else f"arg{i}", value)
    for name, value in kwargs.items():
        visit(name, value)
    if unknown:
        return  # an argument whose extent we cannot know: check nothing rather than cry wolf
    starts = sorted(regions)
    launch.names = [regions[s][1] for s in starts]
    launch.lo = np.array(starts, dtype=np.int64)
    launch.hi = np.array([s + regions[s][0] for s in starts], dtype=np.int64)


def _storage_extent(value):
    if type(value).__name__ == "TensorWrapper":  # triton.reinterpret view
        value = value.base
    try:
        storage = value.untyped_storage()
        return int(storage.data_ptr()), int(storage.nbytes())
    except Exception:
        return None


def _check(op: str, builder, ptrs, mask) -> None:
    stack = getattr(_tls, "launches", None)
    if not stack or stack[-1].lo is None:
        return
    launch = stack[-1]
    addrs = np.asarray(ptrs.data)
    if mask is not None:
        active = np.asarray(mask.data, dtype=bool)
        if not active.all():
            addrs = addrs[np.broadcast_to(active, addrs.shape)]
    if addrs.size == 0:
        return
    # Pointers are uint64; a negative offset wraps past 2**63, which as int64 is below every region.
    addrs = addrs.astype(np.uint64, copy=False).reshape(-1).view(np.int64)
    itemsize = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
    lo, hi = launch.lo, launch.hi
    first, last = addrs.min(), addrs.max()
    region = np.searchsorted(lo, first, side="right") - 1
    if region >= 0 and last + itemsize <= hi[region]:
        return  # fast path: every lane in one argument
    if lo.size == 0:
        ok = np.zeros(addrs.shape, dtype=bool)
    else:
        region = np.searchsorted(lo, addrs, side="right") - 1
        ok = (region >= 0) & (addrs <= hi[np.maximum(region, 0)] - itemsize)
    if ok.all():
        return
    bad = addrs[~ok]
    raise TritonOutOfBoundsError(
        _describe(op, launch, builder, int(bad[0]), int(bad.size), int(addrs.size), itemsize,
                  ptrs.get_element_ty()),
        kernel=launch.kernel, op=op, lanes=int(bad.size))


def _describe(op, launch, builder, addr, n_bad, n_active, itemsize, elem_ty) -> str:
    where = f"kernel '{launch.kernel}'"
    grid_idx = getattr(builder, "grid_idx", None)
    if grid_idx is not None:
        where += f" program {tuple(int(i) for i in grid_idx)}"
    line = _kernel_line()
    if line:
        where += f" at {line}"
    lanes = f"{n_bad} of {n_active} active lanes outside every tensor argument"
    if not launch.names:
        return (f"out-of-bounds {op} in {where}: {lanes} (the launch has no tensor arguments); "
                "pass tensors, not raw addresses")
    lo = launch.lo.tolist()
    hi = launch.hi.tolist()
    gap = [lo[i] - addr if addr < lo[i] else max(0, addr + itemsize - hi[i]) for i in range(len(lo))]
    i = min(range(len(lo)), key=gap.__getitem__)
    offset, size, name = addr - lo[i], hi[i] - lo[i], launch.names[i]
    size_txt = f"{size} bytes = {size // itemsize} x {elem_ty}" if size % itemsize == 0 else f"{size} bytes"
    if offset < 0:
        detail = f"first at byte offset {offset}, before the start of argument '{name}' ({size_txt})"
        hint = "check for negative offsets"
    else:
        detail = f"first at byte offset {offset} of argument '{name}', which holds {size_txt}"
        hint = "mask the tail (e.g. mask=offs < n) or use boundary_check for block pointers"
    return f"out-of-bounds {op} in {where}: {lanes} ({detail}); {hint}"


_SKIP_DIRS = (os.path.dirname(np.__file__), os.path.dirname(os.path.abspath(__file__)))


def _kernel_line() -> str:
    """`file:line: source` of the innermost kernel frame (the interpreter keeps the kernel's own
    file and line numbers when it re-executes it)."""
    try:
        import triton
        skip = _SKIP_DIRS + (os.path.dirname(triton.__file__),)
        frame = sys._getframe(2)
        while frame is not None:
            filename = frame.f_code.co_filename
            if not os.path.abspath(filename).startswith(skip):
                source = linecache.getline(filename, frame.f_lineno).strip()
                text = f"{os.path.basename(filename)}:{frame.f_lineno}"
                return f"{text}: `{source}`" if source else text
            frame = frame.f_back
    except Exception:
        pass
    return ""


def _checked_load(original):
    def create_masked_load(self, ptrs, mask, *args, **kwargs):
        _check("load", self, ptrs, mask)
        return original(self, ptrs, mask, *args, **kwargs)
    return create_masked_load


def _checked_store(original):
    def create_masked_store(self, ptrs, value, mask, *args, **kwargs):
        _check("store", self, ptrs, mask)
        return original(self, ptrs, value, mask, *args, **kwargs)
    return create_masked_store


def _checked_rmw(original):
    def create_atomic_rmw(self, rmw_op, ptr, val, mask, *args, **kwargs):
        _check("atomic", self, ptr, mask)
        return original(self, rmw_op, ptr, val, mask, *args, **kwargs)
    return create_atomic_rmw


def _checked_cas(original):
    def create_atomic_cas(self, ptr, *args, **kwargs):
        _check("atomic", self, ptr, None)
        return original(self, ptr, *args, **kwargs)
    return create_atomic_cas


MEMORY_OPS = {
    "create_masked_load": _checked_load,
    "create_masked_store": _checked_store,
    "create_atomic_rmw": _checked_rmw,
    "create_atomic_cas": _checked_cas,
}
