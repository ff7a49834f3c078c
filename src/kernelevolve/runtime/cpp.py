"""`load_cpp`: compile a C++17 source string into a shared library and load it with ctypes.

Compiled with `g++ -O3 -march=native -fopenmp -fPIC -shared -std=c++17` plus the caller's flags
(about 0.2 s for a small kernel, versus ~25 s for torch's `load_inline`). Libraries are cached by
a hash of source, flags and compiler version, so a candidate evaluated twice compiles once.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

from kernelevolve import knobs
from kernelevolve.errors import CppCompileError
from kernelevolve.runtime import launches

BASE_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17")
_NAME_RE = re.compile(r"[^A-Za-z0-9_]+")
_MAX_ERROR_LINES = 40
_loaded: list[str] = []


@functools.lru_cache(maxsize=None)
def compiler_version(cxx: str | None = None) -> str:
    cxx = cxx or knobs.cxx()
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CppCompileError(f"C++ compiler {cxx!r} is not usable: {exc}; install g++ or set CXX")
    return (out.stdout.splitlines() or ["unknown"])[0].strip()


class _CountingFuncPtr(ctypes._CFuncPtr):  # type: ignore[name-defined,misc]
    """A cdecl function pointer that counts its calls as kernel launches."""

    _flags_ = ctypes._FUNCFLAG_CDECL  # type: ignore[attr-defined]
    _restype_ = ctypes.c_int

    def __call__(self, *args):
        launches.record("cpp")
        if launches.suppressed():
            return None
        return super().__call__(*args)


class KernelLibrary(ctypes.CDLL):
    """A `ctypes.CDLL` whose function calls are counted by the harness's launch accounting."""

    def __init__(self, path: str):
        super().__init__(path)
        # CDLL.__init__ installs its own _FuncPtr class on the instance; replace it after.
        self._FuncPtr = _CountingFuncPtr


def cache_key(source: str, flags: Sequence[str], version: str) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(flags), version):
        h.update(part.encode())
        h.update(b"\x01")
    return h.hexdigest()


def load_cpp(source: str, *, name: str | None = None, flags: Sequence[str] = ()) -> ctypes.CDLL:
    """Compile `source` (C++17) and return the loaded library.

    Exported functions should be declared `extern "C"`. Raises `CppCompileError` with the
    compiler's first errors, each with its source line, when compilation fails.
    """
    if not isinstance(source, str) or not source.strip():
        raise CppCompileError("load_cpp: source must be a non-empty string of C++ code")
    flags = tuple(str(f) for f in flags)
    cxx = knobs.cxx()
    version = compiler_version(cxx)
    key = cache_key(source, flags, version)
    stem = _NAME_RE.sub("_", name or "kernel")[:48] or "kernel"
    out_dir = knobs.cache_dir() / "cpp"
    lib_path = out_dir / f"{stem}-{key[:20]}.so"
    if not lib_path.exists():
        _compile(source, flags, cxx, out_dir, lib_path, stem)
    _loaded.append(str(lib_path))
    return KernelLibrary(str(lib_path))


def loaded_libraries() -> list[str]:
    """Paths of the libraries `load_cpp` loaded in this process (stored as run artifacts)."""
    return list(dict.fromkeys(_loaded))


def _compile(source: str, flags: tuple[str, ...], cxx: str, out_dir: Path, lib_path: Path,
             stem: str) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kecc-", dir=out_dir) as tmp:
        src = Path(tmp) / f"{stem}.cpp"
        src.write_text(source)
        tmp_lib = Path(tmp) / f"{stem}.so"
        cmd = [cxx, *BASE_FLAGS, *flags, str(src), "-o", str(tmp_lib)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise CppCompileError(f"load_cpp: {cxx} took over 300 s compiling {stem}.cpp") from None
        if proc.returncode != 0:
            log = proc.stderr.replace(str(src), f"{stem}.cpp")
            raise CppCompileError(_summarise_errors(log, stem), log)
        os.replace(tmp_lib, lib_path)  # atomic: concurrent workers never load half a file


def _summarise_errors(log: str, stem: str) -> str:
    """Keep the compiler's error lines with their source line and caret, drop the noise."""
    lines = log.splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        if ": error:" in line or ": fatal error:" in line:
            keep.append(line)
            # g++ prints the offending source line and a caret line right after the message
            for follow in lines[i + 1:i + 3]:
                if follow.startswith(" ") and not re.match(r"^\S+:\d+", follow):
                    keep.append(follow)
        if len(keep) >= _MAX_ERROR_LINES:
            break
    if not keep:
        keep = lines[-_MAX_ERROR_LINES:]
    n_errors = sum(1 for line in keep if ": error:" in line or ": fatal error:" in line)
    header = f"C++ compilation of {stem}.cpp failed ({n_errors} error(s)):"
    return "\n".join([header, *keep])


def ptr(tensor) -> ctypes.c_void_p:
    """The data pointer of a tensor, ready to pass to a `load_cpp` function."""
    return ctypes.c_void_p(tensor.data_ptr())
