"""Load a registered kernel for serving: verified bytes only, no compiler, no harness.

The kernel's source and every compiled library are read from the registry's object store and
hashed; a byte that differs from what `promote` recorded refuses the load with a RegistryError
naming the file (a tampered or damaged registry never runs). The verified bytes are written to
a private folder (0700) and loaded from there, so what was hashed is what runs. While the
kernel's module executes, `load_cpp` is answered from the registered libraries by the hash of
the source and flags it asks for; a library the registry does not hold is refused rather than
compiled (a serving machine need not have a compiler, and must not run unvetted code).
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import shutil
import sys
import tempfile
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from kernelevolve.registry.db import KernelRecord, Registry, RegistryError

_service_lock = threading.RLock()


@dataclass
class LoadedKernel:
    record: KernelRecord
    module: types.ModuleType
    folder: Path
    libraries: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)
    lazy: bool = False  # some registered library was not asked for at import: serve at call time

    @property
    def model_class(self) -> type:
        return self.module.ModelNew

    @contextlib.contextmanager
    def serving(self) -> Iterator[None]:
        """`load_cpp` answered from the registered libraries while the block runs."""
        from kernelevolve.runtime import cpp

        with _service_lock:
            before = cpp._build_service
            cpp.set_build_service(self._service)
            try:
                yield
            finally:
                cpp.set_build_service(before)

    def _service(self, source: str, flags: tuple[str, ...], name: str) -> dict[str, Any]:
        key = (hashlib.sha256(source.encode()).hexdigest(), tuple(flags))
        path = self.libraries.get(key)
        if path is None:
            return {"ok": False, "kind": "compile",
                    "message": f"{self.record.label} asked load_cpp for a library the registry "
                               f"does not hold ({name}, source {key[0][:12]}, flags "
                               f"{list(flags)}); serving never compiles: promote it again"}
        self._asked.add(key)
        return {"ok": True, "path": path}

    _asked: set = field(default_factory=set)


def verified_bytes(registry: Registry, object_hash: str, expected: str, what: str) -> bytes:
    """The object's bytes, or a RegistryError when they are missing or hash to anything but
    `expected`."""
    try:
        path = registry.objects.path(object_hash)
        data = path.read_bytes()
    except (OSError, RegistryError, ValueError) as exc:
        raise RegistryError(f"{what} is missing from {registry.root} ({exc}); restore the "
                            "registry folder or promote the kernel again") from None
    found = hashlib.sha256(data).hexdigest()
    if found != expected:
        raise RegistryError(f"{what} does not match its recorded hash (recorded {expected[:16]}, "
                            f"found {found[:16]}): the registry's copy was altered; it is not "
                            "loaded; restore the folder or promote the kernel again")
    return data


def load_kernel(registry: Registry, record: KernelRecord) -> LoadedKernel:
    """Verify and import a registered kernel's module (ModelNew not yet constructed), from a
    private folder removed when the load fails or the process exits."""
    folder = Path(tempfile.mkdtemp(prefix=f"ke-serve-{record.name}-v{record.version}-"))
    os.chmod(folder, 0o700)
    try:
        loaded = _load_into(registry, record, folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    # Its libraries are mapped and a lazy one may still be opened at a later call: the folder
    # stays while the process lives and goes with it.
    atexit.register(shutil.rmtree, folder, True)
    return loaded


def _load_into(registry: Registry, record: KernelRecord, folder: Path) -> LoadedKernel:
    entry = record.entry
    src = entry["source"]
    code = verified_bytes(registry, src["object"], src["sha256"],
                          f"{record.label}: kernel source {src['file']}")
    loaded = LoadedKernel(record=record, module=types.ModuleType("placeholder"), folder=folder)
    for lib in entry.get("libraries", []):
        data = verified_bytes(registry, lib["object"], lib["sha256"],
                              f"{record.label}: compiled library {lib['file']}")
        path = folder / lib["file"]
        path.write_bytes(data)
        loaded.libraries[(lib["source_sha256"], tuple(lib["flags"]))] = str(path)
    py = folder / f"{record.name.replace('-', '_').replace('.', '_')}_v{record.version}.py"
    py.write_bytes(code)
    loaded.module = _exec_module(py, code, record, loaded)
    loaded.lazy = set(loaded.libraries) - loaded._asked != set()
    return loaded


def _exec_module(py: Path, code: bytes, record: KernelRecord, loaded: LoadedKernel
                 ) -> types.ModuleType:
    mod_name = f"kernelevolve_registry.{py.stem}_{id(loaded):x}"
    module = types.ModuleType(mod_name)
    module.__file__ = str(py)
    sys.modules[mod_name] = module
    try:
        with loaded.serving():
            exec(compile(code, str(py), "exec"), module.__dict__)  # noqa: S102 - verified bytes
    except RegistryError:
        sys.modules.pop(mod_name, None)
        raise
    except Exception as exc:  # noqa: BLE001 - reported as one line naming the kernel
        sys.modules.pop(mod_name, None)
        first = (str(exc).strip().splitlines() or [""])[0]
        raise RegistryError(f"{record.label}: importing the kernel failed "
                            f"({type(exc).__name__}: {first[:300]})") from None
    if not isinstance(getattr(module, "ModelNew", None), type):
        raise RegistryError(f"{record.label}: the kernel module defines no ModelNew class")
    return module
