"""Triton guard: count every Triton launch, and bounds-check memory in the Triton interpreter.

The sandboxed worker calls `install()` before it imports a candidate. From then on:

* Every `kernel[grid](...)` of a `@triton.jit` kernel, plain, `@triton.autotune`d or
  `@triton.heuristics`-wrapped, calls `launches.record("triton")` exactly once, on a GPU and under
  `TRITON_INTERPRET=1` alike. The autotuner's benchmark launches during that call are not counted
  separately, so the count does not depend on whether the tuning cache was warm.
* Under the interpreter, every load, store and atomic checks, before touching memory, that each
  active lane (mask true) addresses a whole element inside the storage of one of the launch's
  tensor arguments. The interpreter itself reads and writes raw host addresses unchecked: a small
  over-read returns garbage and an over-write corrupts the heap. A violation raises
  `TritonOutOfBoundsError`, whose one-line message is meant to be pasted into a prompt.

Hook points (the same in triton 3.6 and 3.7; all patched on the class, so kernels defined after
`install()` are covered, and every patch is skipped when its target does not exist):

* Launch = "a leaf actually launched": `JITFunction.run` (GPU; subclasses inherit it),
  `InterpretedFunction.run` (interpreter) and `CompiledKernel.__getitem__` (a kernel compiled with
  `warmup` and launched directly). Warm-up calls and async-compile misses launch nothing.
* Scope = "one user launch": `KernelInterface.__getitem__` (what `kernel[grid]` calls, inherited by
  every wrapper), `Autotuner.run` and `Heuristics.run`. Leaves inside an open scope only mark it;
  the outermost scope records once when it closes.
* Bounds: `GridExecutor.__call__` opens a per-launch context, `GridExecutor._init_args_hst` yields
  the host tensors whose addresses the interpreter dereferences (for CPU tensors they share storage
  with the arguments; for device tensors they are host copies), and `InterpreterBuilder`'s
  `create_masked_load` / `create_masked_store` (which plain, block-pointer and descriptor loads and
  stores all funnel through) plus `create_atomic_rmw` / `create_atomic_cas` check before the access.

Kernels launched by other means (torch.compile/Inductor calls its compiled launchers directly) are
not counted: they are not the candidate's own Triton kernels.
"""
from __future__ import annotations

import functools
import linecache
import os
import sys
import threading
import time
from dataclasses import dataclass

import numpy as np

from kernelevolve.runtime import launches

__all__ = ["TritonOutOfBoundsError", "install", "installed"]

_MARK = "_kernelevolve_guard"
_state = {"installed": False}
_install_lock = threading.Lock()
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


def installed() -> bool:
    """Whether `install()` has put the hooks in place (False when triton is not importable)."""
    return _state["installed"]


def install() -> None:
    """Install the launch counter and the interpreter bounds checker; idempotent, never raises
    ImportError when triton is missing."""
    with _install_lock:
        if _state["installed"]:
            return
        try:
            import triton  # noqa: F401
            from triton.runtime import jit
        except Exception:  # triton absent or broken: nothing to guard
            return
        _patch(jit, "KernelInterface", "__getitem__", _scoped_getitem)
        _patch(jit, "JITFunction", "run", _leaf_run(needs_result=True))
        try:
            from triton.runtime import autotuner
            _patch(autotuner, "Autotuner", "run", _scoped_run)
            _patch(autotuner, "Heuristics", "run", _scoped_run)
            _patch_autotuner_bench(autotuner)
        except Exception:
            pass
        try:
            from triton.compiler import compiler
            _patch(compiler, "CompiledKernel", "__getitem__", _compiled_getitem)
        except Exception:
            pass
        try:  # importing it is harmless on a GPU machine; patching it only matters when interpreting
            from triton.runtime import interpreter
            _patch(interpreter, "InterpretedFunction", "run", _leaf_run(needs_result=False))
            _patch(interpreter, "GridExecutor", "__call__", _grid_call)
            _patch(interpreter, "GridExecutor", "_init_args_hst", _capture_host_args)
            for name, wrap in _MEMORY_OPS.items():
                _patch(interpreter, "InterpreterBuilder", name, wrap)
        except Exception:
            pass
        _state["installed"] = True


def _patch(module, cls_name: str, attr: str, make_wrapper) -> None:
    cls = getattr(module, cls_name, None)
    original = cls.__dict__.get(attr) if cls is not None else None
    if original is None or getattr(original, _MARK, False):
        return
    wrapper = functools.wraps(original)(make_wrapper(original))
    setattr(wrapper, _MARK, True)
    setattr(cls, attr, wrapper)


# --------------------------------------------------------------------------- launch counting

def _note_launch() -> None:
    if getattr(_tls, "depth", 0):
        _tls.pending = True
    else:
        launches.record("triton")


def _in_scope(call):
    """Run `call()` as one user launch: leaves inside it are recorded once, at the outermost."""
    depth = getattr(_tls, "depth", 0)
    if depth == 0:
        _tls.pending = False
    _tls.depth = depth + 1
    try:
        result = call()
    finally:
        _tls.depth = depth
    if depth == 0 and _tls.pending:
        _tls.pending = False
        launches.record("triton")
    return result


def _scoped_getitem(original):
    def __getitem__(self, grid):
        if launches.suppressed():  # integrity probe: count the launch, skip the kernel
            return lambda *args, **kwargs: launches.record("triton")
        launcher = original(self, grid)
        return lambda *args, **kwargs: _in_scope(lambda: launcher(*args, **kwargs))
    return __getitem__


def _scoped_run(original):
    def run(self, *args, **kwargs):
        return _in_scope(lambda: original(self, *args, **kwargs))
    return run


def _leaf_run(needs_result: bool):
    def make(original):
        def run(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            # JITFunction.run returns None when nothing was launched (async compile miss).
            if not kwargs.get("warmup", False) and (result is not None or not needs_result):
                _note_launch()
            return result
        return run
    return make


def _compiled_getitem(original):
    def __getitem__(self, grid):
        runner = original(self, grid)

        def counted(*args, **kwargs):
            result = runner(*args, **kwargs)
            _note_launch()
            return result
        return counted
    return __getitem__


# --------------------------------------------------------------------------- interpreter autotune

class _GuardProperty(property):
    pass


def _interpreting() -> bool:
    try:
        from triton import knobs
        return bool(knobs.runtime.interpret)
    except Exception:
        return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


def _bench_once(kernel_call, quantiles=None, **_):
    start = time.perf_counter()
    kernel_call()
    ms = (time.perf_counter() - start) * 1e3
    return [ms] * len(quantiles) if quantiles else ms


def _patch_autotuner_bench(autotuner) -> None:
    """Under the interpreter, `@triton.autotune` without its own `do_bench` asks the GPU driver
    for a benchmarker and fails on a machine without a GPU ("0 active drivers"); on one with a GPU
    it would time interpreted kernels for ~100 ms each. Run each config once instead: every config
    is still executed (and bounds-checked), and the pick is as arbitrary as interpreted timings are."""
    cls = getattr(autotuner, "Autotuner", None)
    original = cls.__dict__.get("do_bench") if cls is not None else None
    if original is None or getattr(original, _MARK, False):
        return
    getter = getattr(original, "func", None) or getattr(original, "fget", None)
    if getter is None:
        return

    def do_bench(self):
        if getattr(self, "_do_bench", None) is None and _interpreting():
            return _bench_once
        return getter(self)

    prop = _GuardProperty(do_bench)
    setattr(prop, _MARK, True)
    setattr(cls, "do_bench", prop)


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


_MEMORY_OPS = {
    "create_masked_load": _checked_load,
    "create_masked_store": _checked_store,
    "create_atomic_rmw": _checked_rmw,
    "create_atomic_cas": _checked_cas,
}
