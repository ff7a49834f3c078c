"""Every environment variable kernelevolve reads, in one typed place.

Tests change knobs with `knobs.override(...)`, which restores the previous values on exit.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator


def _get(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return value if value not in (None, "") else default


def cache_dir() -> Path:
    """Compiled-kernel cache (g++ outputs), shared across runs. KERNELEVOLVE_CACHE_DIR."""
    base = _get("KERNELEVOLVE_CACHE_DIR")
    if base:
        return Path(base)
    xdg = _get("XDG_CACHE_HOME", str(Path.home() / ".cache"))
    return Path(xdg) / "kernelevolve"


def default_config() -> Path | None:
    """A config file (TOML, the --config format) used by optimize, bench and tune-model when no
    --config is given: this machine's or this project's defaults. KERNELEVOLVE_CONFIG."""
    value = _get("KERNELEVOLVE_CONFIG")
    return Path(value) if value else None


def sandbox_mode() -> str:
    """How workers are isolated: auto (bwrap, else unshare, else none), bwrap, unshare, none."""
    return (_get("KERNELEVOLVE_SANDBOX", "auto") or "auto").lower()


def cxx() -> str:
    """The C++ compiler used by `load_cpp`. CXX, default g++."""
    return _get("CXX", "g++") or "g++"


def compile_memory_mb() -> int | None:
    """Address-space limit of a compiler run on candidate code, in MiB
    (KERNELEVOLVE_COMPILE_MEMORY_MB; default: runtime/cpp_limits.py)."""
    return _positive_int("KERNELEVOLVE_COMPILE_MEMORY_MB")


def compile_cpu_s() -> int | None:
    """CPU-time limit of a compiler run on candidate code, in seconds
    (KERNELEVOLVE_COMPILE_CPU_S; default 120)."""
    return _positive_int("KERNELEVOLVE_COMPILE_CPU_S")


def library_folders() -> list[str]:
    """Folders the user points libraries at: toolkit roots (CUDA_HOME, CUDA_PATH, ROCM_PATH,
    HIP_PATH) and the entries of LD_LIBRARY_PATH (mapped read-only into workers)."""
    found = [_get(name, "") or "" for name in ("CUDA_HOME", "CUDA_PATH", "ROCM_PATH", "HIP_PATH")]
    found += (_get("LD_LIBRARY_PATH", "") or "").split(os.pathsep)
    return [p for p in found if p]


def worker_threads() -> int | None:
    """Threads a worker may use (torch and OpenMP). KERNELEVOLVE_THREADS; default: all CPUs."""
    return _positive_int("KERNELEVOLVE_THREADS")


def _positive_int(name: str) -> int | None:
    """A whole number above 0 from the environment, or None when unset; a one-line UsageError
    naming the variable otherwise."""
    value = (_get(name, "") or "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        from kernelevolve.errors import UsageError

        raise UsageError(f"{name}={value!r}: expected a whole number above 0; set it to one or "
                         "unset it")
    return int(value)


# The environment a worker (and so candidate code) gets is built from these names only, so a
# secret under any name (DATABASE_URL, SENTRY_DSN, *_PASS, ...) never reaches it. The harness adds
# its own settings (threads, OMP_WAIT_POLICY, TMPDIR, HOME) on top. Each registered platform and
# language adds the names its toolchain reads (Platform.env_names, Language.env_names).
WORKER_ENV_NAMES = (
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH",
)
WORKER_ENV_PREFIXES = ("LC_",)


def worker_env_extra() -> tuple[str, ...]:
    """More variable names to pass to workers, comma-separated: KERNELEVOLVE_WORKER_ENV (an
    explicit opt-in; nothing else outside WORKER_ENV_NAMES ever reaches candidate code)."""
    value = _get("KERNELEVOLVE_WORKER_ENV", "") or ""
    return tuple(n.strip() for n in value.split(",") if n.strip())


def triton_interpret() -> bool:
    """Triton's interpreter mode, as Triton reads it (runtime/triton_guard.py falls back to it
    where `triton.knobs` cannot say)."""
    return (_get("TRITON_INTERPRET", "0") or "0").lower() in ("1", "true", "on", "yes")


def preload_modules() -> list[str]:
    """Modules the sandboxed worker server imports before forking (KERNELEVOLVE_PRELOAD, set by
    the driver from the platform's preload list)."""
    return [m for m in (_get("KERNELEVOLVE_PRELOAD", "torch") or "").split(",") if m]


def device_profile() -> bool:
    """KERNELEVOLVE_DEVICE_PROFILE=1: record a kernel table (torch.profiler) per timed case on
    GPU platforms (the in-process protocol)."""
    return _get("KERNELEVOLVE_DEVICE_PROFILE") == "1"


def omp_wait_policy() -> str | None:
    """OMP_WAIT_POLICY as the worker runs under it (recorded in the fingerprint)."""
    return _get("OMP_WAIT_POLICY")


PRICES_ENV = "KERNELEVOLVE_PRICES"


def prices_file() -> str:
    """A TOML file of model prices overlaid on the packaged table (KERNELEVOLVE_PRICES)."""
    return _get(PRICES_ENV, "") or ""


def secret(name: str) -> str:
    """The value of the variable the user named for an API key (--llm-api-key-env, or the
    provider's default such as OPENAI_API_KEY); empty when unset. Never passed to workers."""
    return _get(name, "") or ""


def ray_auth() -> tuple[str | None, str | None]:
    """RAY_AUTH_MODE and RAY_AUTH_TOKEN, for joining a token-protected Ray cluster."""
    return _get("RAY_AUTH_MODE"), _get("RAY_AUTH_TOKEN")


def compiler_env_names(name: str) -> bool:
    """Variables g++ inherits from the driver (the rest of its environment is built)."""
    return name in ("PATH", "LANG", "LANGUAGE") or name.startswith("LC_")


@contextlib.contextmanager
def override(**values: str | None) -> Iterator[None]:
    """Set (or, with None, unset) environment variables for the duration of a block."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        for key, value in values.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = str(value)
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
