"""Inspection of a compiled candidate library, in the driver, before any job may load it.

Three checks, each naming what it found:
1. every dynamic symbol the library imports is on the allowlist (harness/gates/native_allow.py);
   Python C-API, dynamic loading, processes, files and sockets are refused by name;
2. the libraries it links (DT_NEEDED) are the C/C++/math/OpenMP runtimes, with no RPATH or
   RUNPATH that would pull others in from elsewhere;
3. its code holds no system-call instruction (`syscall`, `sysenter`, `int 0x80` on x86, `svc` on
   Arm), read from `objdump -d`, run sandboxed like the compiler.

This is the early, precise reason: a library can still reach a refused function by pointer
arithmetic from an allowed one, and the syscall filter in the job is what holds then.
"""
from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from kernelevolve.harness.gates import native_allow

_SYSCALL_INSN = re.compile(r"\t(syscall|sysenter|int\s+\$0x80|svc\s+#?0x?0*)\b")
_MAX_NAMED = 6


@dataclass
class Inspection:
    ok: bool
    reason: str = ""
    refused: list[str] = field(default_factory=list)
    version: int = native_allow.VERSION

    def to_dict(self) -> dict:
        return {"ok": self.ok, "reason": self.reason, "refused": self.refused,
                "version": self.version}


def inspect_library(path: Path, name: str, objdump: Sequence[str] | None = None) -> Inspection:
    """`objdump`: the command prefix to disassemble with (None: skip the instruction scan)."""
    try:
        imports, needed, paths = _dynamic(path)
    except Exception as exc:  # noqa: BLE001 - a malformed ELF from hostile code is a refusal
        return Inspection(False, f"library inspection refused {name}: not a readable shared "
                                 f"library ({type(exc).__name__}: {exc})")
    refused = sorted(s for s in imports if not native_allow.allowed(s))
    if refused:
        by_category: dict[str, list[str]] = {}
        for sym in refused:
            by_category.setdefault(native_allow.category(sym), []).append(sym)
        parts = [f"{', '.join(syms[:_MAX_NAMED])}{' ...' if len(syms) > _MAX_NAMED else ''} "
                 f"({what})" for what, syms in by_category.items()]
        return Inspection(False, f"library inspection refused {name}: it imports "
                                 + "; ".join(parts) + ". Kernels may use libm, OpenMP, memory "
                                 "allocation and printing; compute in the kernel, and leave "
                                 "files, processes and Python to the harness", refused)
    foreign = [lib for lib in needed if lib not in native_allow.LIBRARIES]
    if foreign or paths:
        what = ", ".join(foreign + [f"search path {p}" for p in paths])
        return Inspection(False, f"library inspection refused {name}: it links {what}; only "
                                 "the C, C++, math and OpenMP runtimes may be linked", foreign)
    if objdump is not None:
        found = _syscall_instructions(path, objdump)
        if found:
            return Inspection(False, f"library inspection refused {name}: its code has "
                                     f"{len(found)} system-call instruction(s) ({found[0]}); "
                                     "kernels make no system calls", found[:_MAX_NAMED])
    return Inspection(True)


def _dynamic(path: Path) -> tuple[set[str], list[str], list[str]]:
    from elftools.elf.elffile import ELFFile

    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        if elf.header["e_type"] != "ET_DYN":
            raise ValueError(f"ELF type {elf.header['e_type']}, not a shared library")
        imports: set[str] = set()
        dynsym = elf.get_section_by_name(".dynsym")
        if dynsym is not None:
            for sym in dynsym.iter_symbols():
                if sym.name and sym["st_shndx"] == "SHN_UNDEF":
                    imports.add(sym.name)
        needed, paths = [], []
        dynamic = elf.get_section_by_name(".dynamic")
        if dynamic is not None:
            for tag in dynamic.iter_tags():
                if tag.entry.d_tag == "DT_NEEDED":
                    needed.append(tag.needed)
                elif tag.entry.d_tag in ("DT_RPATH", "DT_RUNPATH"):
                    paths.append(getattr(tag, "rpath", None) or getattr(tag, "runpath", ""))
    return imports, needed, paths


def _syscall_instructions(path: Path, prefix: Sequence[str]) -> list[str]:
    try:
        out = subprocess.run([*prefix, "objdump", "-d", "--no-show-raw-insn", str(path)],
                             capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [f"objdump failed: {exc}"]
    if out.returncode != 0:
        return [f"objdump failed: {out.stderr.strip()[:200]}"]
    found, function = [], "?"
    for line in out.stdout.splitlines():
        if line.endswith(">:"):
            function = line.split("<", 1)[-1][:-2]
        elif _SYSCALL_INSN.search(line):
            found.append(f"`{_SYSCALL_INSN.search(line).group(1)}` in {function}")
    return found
