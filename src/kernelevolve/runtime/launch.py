"""`kernel_launcher`: call a `load_cpp` kernel with tensors and ints at ATen's cost, not ctypes'.

A ctypes call from Python costs about a microsecond beyond the kernel (argument conversion,
the launch-counting wrapper, one `.data_ptr()` per tensor in the glue), as much as eager's whole
kernel for a memory-bound op on 32K elements. The launcher is a CPython extension of the harness
(launch_ext.cpp, built by launch_build.py): one C call that checks every argument against the
kernel's signature (count, torch.Tensor, dtype, CPU, contiguous; ints that fit in int64), so a
wrong call is a Python exception and not a segfault, counts the launch, and calls the kernel.

    _k0 = kernel_launcher(_lib, "k0", (torch.float32, torch.float32), ints=1)
    _k0(x, out, x.numel())

`index_flag=True`: the kernel takes one more argument, an `int32_t*` it sets when an index is out
of range; the launcher passes its own and raises IndexError when set (no tensor allocated for it).

Where the extension cannot be had (no Python headers, no compiler, or a harness job whose driver
could not build it) the same call goes through ctypes, with the same checks, and the process says
so once on stderr.
"""
from __future__ import annotations

import ctypes
import os
import sys
from types import ModuleType
from typing import Any, Sequence

from kernelevolve import knobs
from kernelevolve.errors import CppCompileError
from kernelevolve.runtime import launch_build, launches
from kernelevolve.runtime.cpp import LAUNCH_KIND, KernelLibrary
from kernelevolve.runtime.launch_fallback import CtypesElementwise, CtypesLauncher

MAX_ARGS = 32  # kMaxArgs in launch_ext.cpp
# The extension once loaded, or why not; `prebuilt` set by the harness before candidate code.
_state: dict[str, Any] = {"module": None, "reason": None, "prebuilt": False, "spec": None}
_attached: list[ModuleType] = []


def use_prebuilt(spec: dict[str, str] | None) -> None:
    """In a harness job (no compiler may run there), set before candidate code: the launcher
    is the one the driver built, given as (path, sha256) and loaded at the first launcher a
    candidate makes (a job whose candidate makes none loads nothing and says nothing); None or
    {"error": why}: the driver had none (ctypes then)."""
    _state.update(prebuilt=True, spec=spec, module=None, reason=None)


def kernel_launcher(lib: Any, name: str, tensors: Sequence[Any], ints: int = 0,
                    index_flag: bool = False):
    """A callable that runs kernel `name` of `lib` (a `load_cpp` library): `tensors` gives the
    dtype of each tensor argument in order (pointers in the C signature), `ints` how many
    int64_t follow them, `index_flag` whether one `int32_t*` out-of-range flag ends the list."""
    fn, dtypes = _checked(lib, name, tensors)
    if not isinstance(ints, int) or isinstance(ints, bool) or ints < 0:
        raise ValueError(f"kernel_launcher: ints must be a count >= 0, got {ints!r}")
    flag = bool(index_flag)
    ext = _extension()
    if ext is None or len(dtypes) + ints + flag > MAX_ARGS:
        return CtypesLauncher(lib, name, dtypes, ints, flag)
    return ext.make(_address(fn), lib, name, dtypes, ints, flag, (), 0)


def elementwise_launcher(lib: Any, name: str, inputs: Sequence[Any], outputs: Sequence[Any],
                         domain: int = 0):
    """A callable taking the input tensors only, for a kernel `(inputs..., outputs..., int64_t
    n)` over input `domain`'s elements: each input made contiguous, each output a fresh
    `empty_like(inputs[domain], dtype=...)`, n its numel (no launch when 0); returns the output,
    or a tuple of them. All the glue of an elementwise call in one C call."""
    fn, dtypes = _checked(lib, name, inputs)
    _, outs = _checked(lib, name, outputs)
    if not outs or not isinstance(domain, int) or not 0 <= domain < len(dtypes):
        raise ValueError("elementwise_launcher: at least one output, and domain must index "
                         "an input")
    ext = _extension()
    if ext is None or len(dtypes) + len(outs) + 1 > MAX_ARGS:
        return CtypesElementwise(lib, name, dtypes, outs, domain)
    return ext.make(_address(fn), lib, name, dtypes, 0, False, outs, domain)


def _checked(lib: Any, name: str, tensors: Sequence[Any]) -> tuple[Any, tuple]:
    """The library's function and the dtypes, or a one-line error naming what is wrong."""
    import torch

    if not isinstance(lib, KernelLibrary):
        raise TypeError("kernel_launcher: lib must be a library returned by load_cpp")
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"kernel_launcher: {name!r} is not a kernel name")
    dtypes = tuple(tensors)
    if not all(isinstance(d, torch.dtype) for d in dtypes):
        raise TypeError("kernel_launcher: tensors must be torch dtypes, one per tensor argument")
    try:
        fn = getattr(lib, name)
    except AttributeError:
        raise AttributeError(f"kernel_launcher: the library exports no function {name!r}; "
                             'declare it extern "C"') from None
    if not _defined_in(lib, _address(fn)):  # dlsym also finds libc's functions through lib
        raise AttributeError(f"kernel_launcher: {name!r} is not a function the library itself "
                             "defines; launch only your own kernels")
    return fn, dtypes


def _address(fn: Any) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _defined_in(lib: Any, address: int) -> bool:
    """Whether the code at `address` lies in `lib`'s own file (dladdr names the object)."""
    info = _DlInfo()
    dladdr = ctypes.CDLL(None).dladdr
    dladdr.argtypes, dladdr.restype = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)], ctypes.c_int
    if not dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return False
    return os.path.realpath(info.dli_fname.decode()) == os.path.realpath(lib._name)


def available() -> tuple[bool, str | None]:
    """(whether kernels go through the extension, why not)."""
    return _extension() is not None, _state["reason"]


def _extension() -> ModuleType | None:
    if _state["module"] is not None or _state["reason"] is not None:
        return _state["module"]
    try:
        if _state["prebuilt"]:
            spec = _state["spec"] or {"error": "the harness could not build it for this job"}
            if "error" in spec:
                raise CppCompileError(str(spec["error"]))
        else:
            spec = launch_build.build(knobs.cache_dir() / launch_build.HARNESS_SUBDIR)
        module = launch_build.load(spec)
        _init(module)
    except (CppCompileError, OSError, ImportError, KeyError, TypeError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        _state["reason"] = reason
        print(f"kernelevolve: kernels are called through ctypes, not the C launcher ({reason}); "
              "about a microsecond more per call", file=sys.stderr)
        return None
    _state["module"] = module
    return module


def _init(module: ModuleType) -> None:
    """Hand the extension torch's own descriptors (from the C base class, never from a patchable
    subclass) and attach its launch counter to runtime/launches.py."""
    import torch

    base = getattr(torch._C, "TensorBase", None) or getattr(torch._C, "_TensorBase")
    attrs = vars(base)
    module.init(torch.Tensor, attrs["data_ptr"], attrs["is_contiguous"], attrs["dtype"],
                attrs["is_cpu"], attrs["numel"], attrs["contiguous"],
                torch._C._VariableFunctions.empty_like)
    if module not in _attached:  # a module loaded again (a second use_prebuilt) counts once
        _attached.append(module)
        launches.attach_native(LAUNCH_KIND, module.take, module.suppress)
