"""The project's small exception hierarchy, in two halves.

- `KernelevolveError`: what a user can cause or fix (bad arguments, a broken problem file, a
  missing GPU, an unreachable cluster). It carries a one-line message that names the fault and
  what to do; the CLI prints it and exits 2, never with a traceback.
- `InternalError`: a broken invariant of kernelevolve itself. The CLI prints the traceback and
  asks for a bug report, and exits 70 (EX_SOFTWARE), so a crash of ours is never read as a
  verdict (eval's 1 means "rejected"). Any other exception escaping a command is treated the
  same way.

`InfraError` is neither: the evaluation infrastructure failed on one candidate (a worker that
died, a Ray actor lost); the search records it as data and goes on, never as a fitness of 0.
"""
from __future__ import annotations


class KernelevolveError(Exception):
    """Base class of user-facing errors: a one-line message, exit 2."""

    exit_code = 2


class InternalError(Exception):
    """A kernelevolve bug: an invariant that does not hold. Shown with its traceback."""

    exit_code = 70


class InfraError(Exception):
    """The evaluation infrastructure failed (not the candidate): never a fitness of 0."""


class UsageError(KernelevolveError):
    """Bad command-line arguments or API parameters."""


class ProblemError(KernelevolveError):
    """A problem module that cannot be loaded or whose reference fails."""

    def __init__(self, path: str, fault: str):
        self.path = str(path)
        self.fault = fault
        super().__init__(f"{self.path}: {fault}")

    def __reduce__(self):
        return (type(self), (self.path, self.fault))


class CandidateError(UsageError):
    """A candidate file that cannot be read at all (missing, not a file)."""


class PlatformError(KernelevolveError):
    """An unknown platform, or one whose hardware or toolchain is missing here."""


class SandboxError(KernelevolveError):
    """The worker sandbox could not be set up as configured."""


class ExecutorError(KernelevolveError):
    """The evaluation backend cannot go on (cannot reach the Ray cluster, no actor left): the
    run stops, resumable, instead of recording candidates that nothing measured."""


class CppCompileError(RuntimeError):
    """Raised by `load_cpp` when g++ rejects the source; the message holds the failing lines."""

    def __init__(self, message: str, log: str = ""):
        self.log = log
        super().__init__(message)

    def __reduce__(self):
        return (type(self), (str(self), self.log))


class NativeLibraryRejected(CppCompileError):
    """Raised by `load_cpp` inside the harness when the driver's inspection of the compiled
    library refuses it (a Python C-API import, raw system calls, ...); the message names why."""
