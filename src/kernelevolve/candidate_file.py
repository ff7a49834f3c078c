"""What a candidate file must be before anything runs it: a Python module defining ModelNew.

A C++ or CUDA source passed as a candidate used to reach the harness and come back as a Python
syntax error on its first line; it gets a hint about how native code is written instead.
"""
from __future__ import annotations

from pathlib import Path

from kernelevolve.errors import CandidateError

NATIVE_SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cu", ".cuh", ".hip")


def check_candidate_file(path: str | Path, what: str = "candidate") -> Path:
    """The path, if it names a readable .py module; else a CandidateError saying what to do."""
    p = Path(path)
    if not p.is_file():
        raise CandidateError(f"{what} {p}: no such file; pass the path of a .py module that "
                             "defines ModelNew")
    if p.suffix.lower() in NATIVE_SUFFIXES:
        raise CandidateError(
            f"{what} {p}: candidates are Python modules that define ModelNew; put the "
            f"{p.suffix} source in a string and build it with "
            "kernelevolve.runtime.load_cpp (see examples/softmax/candidate_cpp.py)")
    return p
