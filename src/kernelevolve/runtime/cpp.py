"""`load_cpp`: compile a C++17 source string into a shared library and load it with ctypes.

Compiled with `g++ -O3 -march=native -fopenmp -fPIC -shared -std=c++17` plus the caller's flags
(about 0.2 s for a small kernel, versus ~25 s for torch's `load_inline`). Libraries are cached by
a hash of source, flags and compiler version, so a candidate evaluated twice compiles once, and a
cached library is loaded only if its bytes match the hash recorded when it was built.

Inside a harness job the candidate's process may not run a compiler or write files: there the
harness installs a build service (`set_build_service`) and `load_cpp` asks the driver, which
compiles in a separate sandbox, inspects the library, and answers with a read-only path.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import re
import subprocess
import tempfile
import weakref
from pathlib import Path
from typing import Callable, Sequence

from kernelevolve import knobs
from kernelevolve.errors import CppCompileError, NativeLibraryRejected
from kernelevolve.runtime import cpp_limits, launches
from kernelevolve.runtime.cpp_cache import LIBRARIES_SUBDIR, LibraryCache
from kernelevolve.runtime.cpp_diagnostics import own_lines
from kernelevolve.runtime.cpp_limits import CompileLimits

BASE_FLAGS = ("-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-std=c++17")
_NAME_RE = re.compile(r"[^A-Za-z0-9_]+")
_MAX_ERROR_LINES = 40
LAUNCH_KIND = "cpp"  # what a call of a load_cpp kernel counts as (runtime/launches.py)
_loaded: list[str] = []
# Set inside harness jobs: (source, flags, name) -> {"ok", "path"} or {"ok": False, "kind", ...}
_build_service: Callable[[str, tuple[str, ...], str], dict] | None = None


def set_build_service(service: Callable[[str, tuple[str, ...], str], dict] | None) -> None:
    global _build_service
    _build_service = service


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
        launches.record(LAUNCH_KIND)
        if launches.suppressed():
            return None
        return super().__call__(*args)


class _PlainFuncPtr(ctypes._CFuncPtr):  # type: ignore[name-defined,misc]
    """The same function pointer, uncounted: a plain ctypes call (0.6 us less per launch)."""

    _flags_ = ctypes._FUNCFLAG_CDECL  # type: ignore[attr-defined]
    _restype_ = ctypes.c_int


_libraries: "weakref.WeakSet[KernelLibrary]" = weakref.WeakSet()
_counting = [True]


class KernelLibrary(ctypes.CDLL):
    """A `ctypes.CDLL` whose function calls are counted by the harness's launch accounting
    (until `stop_counting`)."""

    def __init__(self, path: str):
        super().__init__(path)
        # CDLL.__init__ installs its own _FuncPtr class on the instance; replace it after.
        self._FuncPtr = _CountingFuncPtr if _counting[0] else _PlainFuncPtr
        _libraries.add(self)


def stop_counting() -> None:
    """From now on in this process, kernel calls are plain ctypes calls, not counted.

    For a process that only times (the candidate's timed process): no count is read there, and
    the counting wrapper is a Python call on every launch, a cost eager PyTorch does not pay.
    Functions already looked up (`_lib.k0`, with the argtypes the glue set) are swapped for
    plain ones with the same signature; a reference the candidate kept elsewhere still counts,
    which only costs it time."""
    _counting[0] = False
    for lib in list(_libraries):
        lib._FuncPtr = _PlainFuncPtr
        for attr, fn in list(vars(lib).items()):
            if type(fn) is _CountingFuncPtr:
                plain = _PlainFuncPtr((fn.__name__, lib))
                plain.__name__ = fn.__name__
                if fn.argtypes is not None:
                    plain.argtypes = fn.argtypes
                plain.restype = fn.restype
                if fn.errcheck is not None:
                    plain.errcheck = fn.errcheck
                setattr(lib, attr, plain)


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
    stem = library_stem(name)
    if _build_service is not None:
        lib_path = _built_by_service(source, flags, stem)
    else:
        lib_path = str(build(source, flags, stem, LibraryCache(knobs.cache_dir() / LIBRARIES_SUBDIR))[0])
    _loaded.append(lib_path)
    return KernelLibrary(lib_path)


def library_stem(name: str | None) -> str:
    return _NAME_RE.sub("_", name or "kernel")[:48] or "kernel"


def _built_by_service(source: str, flags: tuple[str, ...], stem: str) -> str:
    assert _build_service is not None
    reply = _build_service(source, flags, stem)
    if reply.get("ok") and isinstance(reply.get("path"), str):
        return reply["path"]
    message = str(reply.get("message") or "load_cpp: the build service refused the library")
    if reply.get("kind") == "inspection":
        raise NativeLibraryRejected(message)
    raise CppCompileError(message, str(reply.get("log") or ""))


Runner = Callable[[Path], "tuple[list[str], dict[str, str] | None]"]


def build(source: str, flags: tuple[str, ...], stem: str, cache: LibraryCache, *,
          runner: Runner | None = None) -> tuple[Path, dict]:
    """The cached library for (source, flags, compiler) and its manifest, compiling it when
    missing or when the cached bytes no longer match their recorded hash. `runner(workdir)`
    gives the command prefix and environment to compile with (the harness: a sandbox with an
    allowlisted environment, `workdir` its only writable folder)."""
    cxx = knobs.cxx()
    key = cache_key(source, flags, compiler_version(cxx))
    with cache.locked(key):
        found = cache.lookup(stem, key)
        if found is not None:
            return found
        cache.root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="kecc-", dir=cache.root) as tmp:
            prefix, env = runner(Path(tmp)) if runner else ([], None)
            built = compile_library(source, flags, cxx, Path(tmp), stem, prefix=prefix, env=env)
            return cache.store(stem, key, built, name=stem, flags=list(flags),
                               compiler=compiler_version(cxx))


def loaded_libraries() -> list[str]:
    """Paths of the libraries `load_cpp` loaded in this process (stored as run artifacts)."""
    return list(dict.fromkeys(_loaded))


def compile_library(source: str, flags: tuple[str, ...], cxx: str, workdir: Path, stem: str, *,
                    prefix: Sequence[str] = (), env: dict[str, str] | None = None,
                    limits: CompileLimits | None = None) -> Path:
    """Run the compiler on `source` in `workdir` under `limits` (runtime/cpp_limits.py);
    returns the built library's path there. Its diagnostics keep only what is located in
    `source` itself (runtime/cpp_diagnostics.py)."""
    limits = limits or cpp_limits.default()
    src = workdir / f"{stem}.cpp"
    src.write_text(source)
    out = workdir / f"{stem}.so"
    cmd = [*limits.prefix(), *prefix, cxx, *BASE_FLAGS, *flags, str(src), "-o", str(out)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=limits.wall_seconds,
                              env=env, cwd=workdir, preexec_fn=limits.preexec())
    except subprocess.TimeoutExpired:
        raise CppCompileError(f"C++ compilation of {stem}.cpp stopped: {cxx} took over "
                              f"{limits.wall_seconds:.0f} s (its wall-time limit)") from None
    except OSError as exc:
        raise CppCompileError(f"load_cpp: cannot run {cxx}: {exc}; install g++ or set CXX") \
            from None
    if proc.returncode != 0 or not out.is_file():
        raw = (proc.stderr or proc.stdout).replace(str(src), f"{stem}.cpp")
        log, dropped = own_lines(raw, f"{stem}.cpp", cxx)
        # what the tools said themselves, not a quoted line of source that might say the same
        said = "\n".join(line for line in raw.splitlines()
                         if not line.startswith((" ", "\t", f"{stem}.cpp:")))
        hit = limits.explain(said, proc.returncode)
        if hit:
            raise CppCompileError(f"C++ compilation of {stem}.cpp stopped: {hit}; kernels "
                                  "compile in far less (look for runaway templates, macros or "
                                  "constant tables)", log)
        raise CppCompileError(_summarise_errors(log, stem, dropped), log)
    return out


def _summarise_errors(log: str, stem: str, dropped: int = 0) -> str:
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
    if dropped:
        keep.append(f"({dropped} line(s) located in other files left out)")
    return "\n".join([header, *keep])


def ptr(tensor) -> ctypes.c_void_p:
    """The data pointer of a tensor, ready to pass to a `load_cpp` function."""
    return ctypes.c_void_p(tensor.data_ptr())
