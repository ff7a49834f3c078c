"""Build-variant names of the Hugging Face kernels layout, and why one does not fit this machine.

A kernel repository holds one folder per build under `build/`, named for what the build needs
(the kernels package picks the folder that fits and refuses the others):

- `torch{M}{m}-{cxx11|cxx98}-{backend}-{arch}-{os}` for a build with compiled libraries, e.g.
  `torch213-cxx11-cpu-x86_64-linux`: torch major.minor, torch's C++ ABI, the backend, the CPU
  architecture and the OS (the older, still accepted spelling: kernels >= 0.10 reads it);
- `torch-{backend}` for a build with no compiled part (noarch), e.g. a kernel in Python only.

Our libraries are plain C functions called through ctypes, so torch's ABI does not reach them;
the torch version still does, because the kernel's Python side was checked against one torch.
The backend is the kernelevolve platform's name (cpu, and the GPU platforms' names, which are
the kernels package's backend names too).
"""
from __future__ import annotations

import platform as _pyplatform
import re
from dataclasses import dataclass

_ARCH = re.compile(r"torch(\d)(\d+)-(cxx11|cxx98)-([a-z0-9]+)-([a-z0-9_]+)-([a-z]+)")
_NOARCH = re.compile(r"torch-([a-z0-9]+)")


@dataclass(frozen=True)
class Variant:
    name: str
    torch: str | None        # "2.13"; None for noarch
    cxx11: bool | None
    backend: str
    arch: str | None
    os: str | None


def parse(name: str) -> Variant | None:
    """The variant a build folder's name describes, or None when it is not one."""
    m = _ARCH.fullmatch(name)
    if m:
        return Variant(name, f"{m[1]}.{m[2]}", m[3] == "cxx11", m[4], m[5], m[6])
    m = _NOARCH.fullmatch(name)
    if m:
        return Variant(name, None, None, m[1], None, None)
    return None


def here(backend: str, compiled: bool) -> str:
    """This machine's variant name for a build on `backend` (with compiled libraries or not)."""
    if not compiled:
        return f"torch-{backend}"
    import torch

    major, minor = torch.__version__.split("+")[0].split(".")[:2]
    abi = "cxx11" if torch.compiled_with_cxx11_abi() else "cxx98"
    return f"torch{major}{minor}-{abi}-{backend}-{_arch()}-{_pyplatform.system().lower()}"


def mismatch(variant: Variant, backend: str) -> str | None:
    """None when this machine can load the build, else one line saying why not."""
    if variant.backend != backend:
        return f"{variant.name} is built for {variant.backend}, this kernel runs on {backend}"
    if variant.torch is None:
        return None
    import torch

    have = ".".join(torch.__version__.split("+")[0].split(".")[:2])
    if variant.torch != have:
        return (f"{variant.name} is built for torch {variant.torch}, this machine has torch "
                f"{torch.__version__}")
    abi = torch.compiled_with_cxx11_abi()
    if variant.cxx11 != abi:
        return (f"{variant.name} is built for torch's {'cxx11' if variant.cxx11 else 'cxx98'} "
                f"ABI, this torch uses {'cxx11' if abi else 'cxx98'}")
    if variant.arch != _arch():
        return f"{variant.name} is built for {variant.arch} CPUs, this one is {_arch()}"
    if variant.os != _pyplatform.system().lower():
        return f"{variant.name} is built for {variant.os}, this machine runs " \
               f"{_pyplatform.system().lower()}"
    return None


def _arch() -> str:
    machine = _pyplatform.machine()
    return {"AMD64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
