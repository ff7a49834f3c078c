"""The project's small exception hierarchy.

Every error a user can cause derives from `KernelevolveError` and carries a one-line message that
names the fault and what to do; the CLI prints it and exits 2, never with a traceback.
"""
from __future__ import annotations


class KernelevolveError(Exception):
    """Base class: a user-facing error with a one-line message."""

    exit_code = 2


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
