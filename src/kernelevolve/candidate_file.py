"""A candidate as the harness receives it: its source as text and the name it is shown by.

A candidate enters once: a user's file is checked and read here (`read_candidate`), a run's
node comes from the store as text; from then on the text travels (executor, Ray actor,
evaluator) until the driver writes it into the sandboxed job's own folder.

A C++ or CUDA source passed as a candidate used to reach the harness and come back as a Python
syntax error on its first line; it gets a hint about how native code is written instead.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelevolve.errors import CandidateError

NATIVE_SUFFIXES = (".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cu", ".cuh", ".hip")


@dataclass(frozen=True)
class Candidate:
    """A Python module defining ModelNew, as text. `name` is what results and messages show
    (the user's path, a run's node file); its last part names the file in the job folder."""
    source: str
    name: str

    @property
    def file_name(self) -> str:
        return Path(self.name).name or "candidate.py"


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


def read_candidate(path: str | Path, what: str = "candidate") -> Candidate:
    """The file checked (`check_candidate_file`) and read, once, where it enters."""
    p = check_candidate_file(path, what)
    try:
        source = p.read_text(errors="replace")
    except OSError as exc:
        raise CandidateError(f"{what} {p}: cannot read it ({exc.strerror or exc})") from None
    return Candidate(source, str(p.resolve()))
