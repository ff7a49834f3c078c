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
import threading
import time

from kernelevolve import knobs as ke_knobs
from kernelevolve.runtime import launches
from kernelevolve.runtime.triton_bounds import (MEMORY_OPS, TritonOutOfBoundsError,
                                                _capture_host_args, _grid_call)

__all__ = ["TritonOutOfBoundsError", "install", "installed"]

_MARK = "_kernelevolve_guard"
_state = {"installed": False}
_install_lock = threading.Lock()
_tls = threading.local()


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
            for name, wrap in MEMORY_OPS.items():
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
        return ke_knobs.triton_interpret()


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
