"""g++'s diagnostics cut to the candidate's own source, before they become a reason or a prompt.

g++ quotes the lines of whatever file a diagnostic is located in. Kept: diagnostics located in
the source being compiled (`<stem>.cpp:LINE:COL: ...`, with their quoted lines and carets) and
in the assembly g++ made of it (`ccXXXX.s`: inline asm); a diagnostic located in a system header
keeps its message, the header named by its base name, without the header's lines; one located
in any other file is left out whole, and counted. The driver's, assembler's and linker's own
lines (`g++:`, `cc1plus:`, `ld:`, `collect2:`) stay: they name no file's contents.
"""
from __future__ import annotations

import os
import re
import shutil

_LOCATED = re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+)(?::\d+)?: (?P<rest>.*)$")
_CONTEXT = re.compile(r"^(?P<file>[^\s:][^:]*?): (?P<rest>In .*|At global scope:|"
                      r"At top level:|Assembler messages:)$")
_INCLUDED = re.compile(r"^(?P<lead>In file included from|\s+from) (?P<file>[^:]+):"
                       r"(?P<line>\d+)(?P<end>[:,])$")
_TOOL = re.compile(r"^(\S*/)?(g\+\+|c\+\+|gcc|cc1plus|cc1|collect2|lto-wrapper|as|ld)"
                   r"(-[\w.]+)?: ")
_ASSEMBLY = re.compile(r"(^|/)cc\w+\.s$")
_SYSTEM = ("/usr/", "/lib/", "/lib64/", "/lib32/")


def own_lines(log: str, own: str, cxx: str = "g++") -> tuple[str, int]:
    """The log with only what `own` (the source's name as the log shows it) explains;
    returns it and how many lines about other files were left out."""
    system = _system_roots(cxx)
    kept: list[str] = []
    state, dropped = "own", 0  # where the last located line was: own, system or other
    for line in log.splitlines():
        m = _LOCATED.match(line) or _CONTEXT.match(line) or _INCLUDED.match(line)
        if m is None:
            if _TOOL.match(line):
                kept.append(line)
                state = "own"
            elif state == "own":
                kept.append(line)
            elif state == "other":
                dropped += 1
            continue  # a system header's quoted lines go silently
        where = m.group("file").strip()
        if where == own or _ASSEMBLY.search(where):
            kept.append(line)
            state = "own"
        elif where.startswith(system):
            kept.append(line.replace(where, os.path.basename(where), 1))
            state = "system"
        else:
            dropped += 1
            state = "other"
    return "\n".join(kept), dropped


def _system_roots(cxx: str) -> tuple[str, ...]:
    found = shutil.which(cxx)
    if not found:
        return _SYSTEM
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(found)))
    return _SYSTEM if prefix in ("/", "/usr") else (*_SYSTEM, prefix.rstrip("/") + "/")
