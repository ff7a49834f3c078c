"""Is this machine one a registered kernel's figures and binaries hold on?

A library built with `-march=native` may use any instruction of the machine that built it, a
Triton kernel was tuned for one GPU generation, and a kernel's Python side was checked against
one torch: serving on anything else is outside what the evaluation vouches for. Compared with
the fingerprint recorded at promotion:

- the platform, and the device model (CPU model name, or GPU name);
- every CPU feature flag recorded there must be present here (a superset is fine);
- torch major.minor, and Triton major.minor for Triton kernels; the CUDA / HIP runtime major.

The compiler is not compared: serving loads the registered binary and never compiles; compiler
drift is what `registry revalidate` reports.
"""
from __future__ import annotations

import functools
from typing import Any


def _minor(version: Any) -> str | None:
    if not version:
        return None
    parts = str(version).split("+")[0].split(".")
    return ".".join(parts[:2])


def _major(version: Any) -> str | None:
    return str(version).split(".")[0] if version else None


def mismatch(recorded: dict[str, Any], current: dict[str, Any], language: str) -> str | None:
    """None when compatible, else one line naming the first difference."""
    checks = [("platform", recorded.get("platform"), current.get("platform")),
              ("device", recorded.get("device"), current.get("device")),
              ("torch", _minor(recorded.get("torch")), _minor(current.get("torch")))]
    from kernelevolve.plugins import get_language, language_names, toolkit_labels

    libs = get_language(language).libraries if language in language_names() else ()
    checks += [(lib, _minor(recorded.get(lib)), _minor(current.get(lib))) for lib in libs]
    checks += [(key, _major(recorded.get(key)), _major(current.get(key)))
               for key in toolkit_labels()]
    for what, was, now in checks:
        if was != now:
            return f"{what} differs: measured on {was!r}, this machine has {now!r}"
    missing = sorted(set(recorded.get("cpu_flags") or []) - set(current.get("cpu_flags") or []))
    if missing:
        return f"this CPU lacks {', '.join(missing)}, which the measuring machine had"
    return None


@functools.lru_cache(maxsize=None)
def _current(platform: str) -> dict[str, Any]:
    import torch

    from kernelevolve.plugins import fingerprint

    return fingerprint(platform, threads=torch.get_num_threads())


def current_fingerprint(platform: str) -> dict[str, Any]:
    """This machine's fingerprint for `platform` (computed once per process)."""
    return dict(_current(platform))
