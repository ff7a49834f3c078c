"""The compiler's bounds: address space, CPU time, output size and wall time, and what to say when
one is hit.

A candidate's source is hostile input to g++: exponential templates, macros that expand to a
terabyte of string, constant tables that do not end. Every compiler run (`compile_library`, and
the harness's objdump of a candidate's library) goes under resource limits set on its first
process, the compile sandbox's, which every process after it inherits: `prlimit` where
util-linux has it, else the same limits set between fork and exec. Real kernels compile in well
under 128 MiB and a few seconds (every corpus kernel, the examples, the synthesizer's 45 KB
sources), so the defaults leave a wide margin:
- memory: an eighth of the machine's RAM in whole GiB, 1 to 4 (KERNELEVOLVE_COMPILE_MEMORY_MB);
- CPU time: 120 s per process (KERNELEVOLVE_COMPILE_CPU_S); wall time 300 s or 2.5x the CPU;
- output: 1 GiB per file written.
A bomb hits one of them in seconds and is a `load` rejection that names the limit and its size.
"""
from __future__ import annotations

import os
import re
import resource
import shutil
from dataclasses import dataclass

_GIB = 1 << 30
_MEM = re.compile(r"virtual memory exhausted|out of memory|cannot allocate memory|"
                  r"std::bad_alloc|memory exhausted", re.IGNORECASE)
_CPU = re.compile(r"CPU time limit exceeded", re.IGNORECASE)
_SIZE = re.compile(r"File size limit exceeded", re.IGNORECASE)
_SIGXCPU, _SIGXFSZ = 24, 25


@dataclass(frozen=True)
class CompileLimits:
    memory_bytes: int
    cpu_seconds: int
    file_bytes: int = _GIB
    wall_seconds: float = 300.0

    def prefix(self) -> list[str]:
        """Command words that set the limits for what follows (empty: use `preexec`)."""
        tool = shutil.which("prlimit")
        if not tool:
            return []
        return [tool, f"--as={self.memory_bytes}", f"--cpu={self.cpu_seconds}:"
                f"{self.cpu_seconds + 5}", f"--fsize={self.file_bytes}", "--core=0", "--"]

    def preexec(self):
        """The same limits, set between fork and exec, for machines without prlimit."""
        if shutil.which("prlimit"):
            return None
        limits = ((resource.RLIMIT_AS, self.memory_bytes, self.memory_bytes),
                  (resource.RLIMIT_CPU, self.cpu_seconds, self.cpu_seconds + 5),
                  (resource.RLIMIT_FSIZE, self.file_bytes, self.file_bytes),
                  (resource.RLIMIT_CORE, 0, 0))

        def apply() -> None:
            for which, soft, hard in limits:
                resource.setrlimit(which, (soft, hard))
        return apply

    def explain(self, log: str, returncode: int | None) -> str | None:
        """The limit a failed run hit, in words with its figure; None if it hit none."""
        if _MEM.search(log):
            return f"the compiler exceeded its {_size(self.memory_bytes)} memory limit"
        if _CPU.search(log) or returncode in (-_SIGXCPU, 128 + _SIGXCPU):
            return f"the compiler exceeded its {self.cpu_seconds} s CPU time limit"
        if _SIZE.search(log) or returncode in (-_SIGXFSZ, 128 + _SIGXFSZ):
            return f"the compiler's output exceeded its {_size(self.file_bytes)} file size limit"
        return None


def _size(n: int) -> str:
    return f"{n / _GIB:.3g} GiB" if n >= _GIB else f"{n / (1 << 20):.0f} MiB"


def _ram_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not Linux
        return 8 * _GIB


def default() -> CompileLimits:
    from kernelevolve import knobs

    memory = knobs.compile_memory_mb()
    memory_bytes = memory << 20 if memory else max(1, min(4, _ram_bytes() // 8 // _GIB)) * _GIB
    cpu = knobs.compile_cpu_s() or 120
    return CompileLimits(memory_bytes=memory_bytes, cpu_seconds=cpu,
                         wall_seconds=max(300.0, 2.5 * cpu))
