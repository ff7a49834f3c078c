"""The loader an exported kernel carries (as `_runtime.py`): it must run where kernelevolve is not
installed and no compiler is, so it imports nothing of kernelevolve and builds nothing.

At import of the exported package (`load`):

1. the machine must be one the build can run on: the torch minor version the kernel was checked
   against, and every CPU feature the measuring machine had (a library built with
   -march=native may use any of them: on a CPU without one it dies of SIGILL, not an error);
2. the kernel's source, its problem and every library must hash to what the evidence records;
   a file that does not is named in the error, and nothing is loaded;
3. the verified library bytes are copied into a private folder (0700) and loaded from there,
   so what was hashed is what runs; the kernel's `from kernelevolve.runtime import load_cpp,
   kernel_launcher, ...` is answered by a small stand-in (`load_cpp` returns the shipped library
   built from that source and those flags, and refuses anything else: it never compiles).

Per call (`Kernel.forward`, what the package's layer calls with the user's module): the module
must be the validated one (kernelevolve's binding rules: its weights, shapes and settings read
as the problem's constructor inputs) and the call inside the validated region (dtypes, ranks,
sizes the cases spanned); anything else runs the module's own forward, counted by reason, as
kernelevolve's registry serving does. Why copies of kernelevolve's binding, region and launcher
modules travel with it rather than new code: the rules are then the same ones, by construction.
"""
from __future__ import annotations

import atexit
import builtins
import contextlib
import ctypes
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import types
import weakref
from pathlib import Path
from typing import Any


class KernelLoadError(ImportError):
    """The exported kernel's files are not the exported ones, or its code does not import."""


class CannotRunHere(FileNotFoundError):
    """This machine lacks what the build needs (torch version, CPU features). A
    FileNotFoundError, as the kernels package's own "no build variant for this system" is:
    `kernelize(..., use_fallback=KernelizeFallback.ALL)` then keeps the module's own forward."""


def load(folder: Path, binding: Any, region: Any, launch: Any) -> "Kernel":
    evidence = json.loads((folder / "evidence.json").read_text())
    entry = evidence["entry"]
    why = incompatibility(entry)
    if why is not None:
        raise CannotRunHere(f"kernel {entry.get('name')!r} cannot run here: {why}")
    source = _verified(folder / "kernel.py", entry["source"]["sha256"])
    problem = _verified(folder / "problem.py", entry["problem"]["sha256"])
    private = Path(tempfile.mkdtemp(prefix=f"ke-kernel-{entry.get('name', 'k')}-"))
    os.chmod(private, 0o700)
    atexit.register(shutil.rmtree, private, True)
    libraries = {}
    for lib in entry.get("libraries", []):
        data = _verified(folder / "libs" / lib["file"], lib["sha256"])
        path = private / lib["file"]
        path.write_bytes(data)
        libraries[(lib["source_sha256"], tuple(lib["flags"]))] = str(path)
    shim = _runtime_shim(libraries, launch)
    # module names of their own per export folder (two exports of one kernel may be loaded)
    where = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
    stem = f"_kernelevolve_export_{folder.name}_{where}"
    model = _exec(folder / "problem.py", problem, f"{stem}_problem", None).Model
    module = _exec(folder / "kernel.py", source, f"{stem}_kernel", shim)
    if not isinstance(getattr(module, "ModelNew", None), type):
        raise KernelLoadError(f"{folder / 'kernel.py'} defines no ModelNew class")
    return Kernel(entry, module, model, binding, region.Region(entry["region"]))


def incompatibility(entry: dict[str, Any]) -> str | None:
    """None when this machine has the torch and CPU features the kernel was checked with."""
    import torch

    fp = entry.get("fingerprint") or {}

    def minor(v: Any) -> str:
        return ".".join(str(v).split("+")[0].split(".")[:2])

    if fp.get("torch") and minor(fp["torch"]) != minor(torch.__version__):
        return (f"it was checked with torch {fp['torch']}, this machine has torch "
                f"{torch.__version__}")
    if entry.get("libraries"):
        missing = sorted(set(fp.get("cpu_flags") or []) - cpu_flags())
        if missing:
            return (f"its libraries were built for CPU features this CPU lacks: "
                    f"{', '.join(missing)}")
    return None


def cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key = line.split(":")[0].strip()
                if key in ("flags", "Features"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _verified(path: Path, sha256: str) -> bytes:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KernelLoadError(f"{path} cannot be read ({exc.strerror}); export the kernel "
                              "again") from None
    if hashlib.sha256(data).hexdigest() != sha256:
        raise KernelLoadError(f"{path} does not match the sha256 its evidence records: it was "
                              "modified after export; it is not loaded")
    return data


def _runtime_shim(libraries: dict[tuple, str], launch: Any) -> types.ModuleType:
    """What the kernel's `kernelevolve.runtime` import gets here."""
    shim = types.ModuleType("kernelevolve.runtime")

    def load_cpp(source: str, *, name: str | None = None, flags: Any = ()) -> ctypes.CDLL:
        key = (hashlib.sha256(str(source).encode()).hexdigest(), tuple(str(f) for f in flags))
        path = libraries.get(key)
        if path is None:
            raise KernelLoadError(f"the kernel asked load_cpp for a library this export does "
                                  f"not ship ({name}, flags {list(key[1])}); nothing is compiled "
                                  "here: export it again from the registry")
        return ctypes.CDLL(path)

    def kernel_launcher(lib: Any, name: str, tensors: Any, ints: int = 0,
                        index_flag: bool = False) -> Any:
        return launch.CtypesLauncher(lib, name, tuple(tensors), ints, bool(index_flag))

    def elementwise_launcher(lib: Any, name: str, inputs: Any, outputs: Any,
                             domain: int = 0) -> Any:
        return launch.CtypesElementwise(lib, name, tuple(inputs), tuple(outputs), domain)

    shim.load_cpp = load_cpp
    shim.kernel_launcher = kernel_launcher
    shim.elementwise_launcher = elementwise_launcher
    shim.ptr = lambda t: ctypes.c_void_p(t.data_ptr())
    shim.launch_counts = lambda: {}
    shim.reset_launch_counts = lambda: None
    return shim


def _exec(path: Path, code: bytes, name: str, shim: types.ModuleType | None) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = str(path)
    if shim is not None:
        module.__dict__["__builtins__"] = _builtins_with(shim)
    sys.modules[name] = module  # dataclasses and triton's JIT look their module up
    try:
        exec(compile(code, str(path), "exec"), module.__dict__)  # noqa: S102 - verified bytes
    except KernelLoadError:
        sys.modules.pop(name, None)
        raise
    except Exception as exc:  # noqa: BLE001 - said as one line naming the file
        sys.modules.pop(name, None)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise KernelLoadError(f"importing {path} failed ({type(exc).__name__}: {first})") \
            from None
    return module


def _builtins_with(shim: types.ModuleType) -> dict[str, Any]:
    """Builtins whose `__import__` answers kernelevolve.runtime with the stand-in."""
    real = builtins.__import__

    def imp(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
            level: int = 0) -> Any:
        if level == 0 and name.split(".")[0] == "kernelevolve":
            if name not in ("kernelevolve", "kernelevolve.runtime"):
                raise KernelLoadError(f"an exported kernel may import kernelevolve.runtime "
                                      f"only, not {name}")
            if fromlist and name == "kernelevolve.runtime":
                return shim
            return types.SimpleNamespace(runtime=shim)
        return real(name, globals, locals, fromlist, level)

    table = dict(vars(builtins))
    table["__import__"] = imp
    return table


class Kernel:
    """The loaded kernel: per module of the user's model, a ModelNew sharing its weights."""

    def __init__(self, entry: dict[str, Any], module: types.ModuleType, model: type,
                 binding: Any, region: Any):
        self.entry, self.module, self.model, self.binding = entry, module, model, binding
        self.region = region
        self.counts: dict[str, Any] = {"calls": 0, "served": 0, "fallbacks": {}}
        self._bound: "weakref.WeakKeyDictionary[Any, tuple]" = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def forward(self, original: Any, *args: Any) -> Any:
        """The kernel on `original`'s weights, or `original`'s own forward with the reason."""
        self.counts["calls"] += 1
        why = self._why_not(original, args)
        if why is None:
            try:
                out = self._bound[original][0](*args)
            except Exception:  # noqa: BLE001 - a kernel that raises falls back, counted
                why = "error"
            else:
                self.counts["served"] += 1
                return out
        fallbacks = self.counts["fallbacks"]
        fallbacks[why] = fallbacks.get(why, 0) + 1
        return type(original).forward(original, *args)

    def _why_not(self, original: Any, args: tuple) -> str | None:
        import torch

        if torch.is_grad_enabled() and any(
                getattr(t, "requires_grad", False) for t in (*args, *original.parameters())):
            return "autograd"
        with self._lock:
            if original not in self._bound:
                self._bound[original] = self._bind(original)
        if self._bound[original][0] is None:
            return "module"
        return self.region.admits(args)

    def why_module(self, original: Any) -> str | None:
        """Why `original` is not served (None when it is the validated module)."""
        with self._lock:
            if original not in self._bound:
                self._bound[original] = self._bind(original)
        return self._bound[original][1]

    def _bind(self, original: Any) -> tuple[Any, str | None]:
        cases = [c for c in self.entry.get("binding", []) if c.get("signature")]
        init, why = self.binding.infer_init(self.model, cases, self.binding.signature(original))
        if init is None:
            return None, f"{type(original).__name__} is not the validated module: {why}"
        kernel, why = self._build(init, original)
        if kernel is not None:
            kernel.train(original.training)
        return kernel, why

    def _build(self, init: list[Any], original: Any) -> tuple[Any, str | None]:
        """ModelNew(*init) with the original's own tensors (built on meta when it can be)."""
        import torch

        for device in ("meta", None):
            try:
                with torch.device(device) if device else contextlib.nullcontext():
                    kernel = self.module.ModelNew(*init)
            except Exception as exc:  # noqa: BLE001 - the kernel's constructor is its own code
                if device == "meta":
                    continue
                return None, f"ModelNew({init}) raised {type(exc).__name__}"
            why = self.binding.tie_state(kernel, original)
            if why is not None:
                return None, why
            if device is None or not _keeps_meta(kernel):
                return kernel, None
        return None, "unreachable"


def _keeps_meta(module: Any) -> bool:
    import torch

    for sub in module.modules():
        for value in (*vars(sub).values(), *sub._parameters.values(), *sub._buffers.values()):
            if isinstance(value, torch.Tensor) and value.is_meta:
                return True
    return False
