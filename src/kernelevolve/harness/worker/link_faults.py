"""Why a timed process's link to the coordinator broke, in words a model can act on.

The coordinator (harness/worker/measure.py, harness/worker/timed_link.py) talks to the candidate's process
over a socket. When the answer it waits for does not come, the reason given is decided here from
what the coordinator itself observed: the frame that arrived instead (a build request, another
message, bytes that are no message), the end of the channel, and the process's exit status as
`waitpid` reports it. Nothing the candidate's process says about itself enters the verdict; its
words are never quoted here. Each reason says what most likely happened and what to do.
"""
from __future__ import annotations

import os
import signal
import time
from typing import Any

# A build request (load_cpp) that arrives during a timed batch: the case's first call, which
# builds what forward builds lazily, has already run untimed (measure.CaseTiming._first_call).
LATE_BUILD = ("the library was built inside forward during a timed batch (load_cpp was called "
              "after the case's first, untimed call); build every library at import: call "
              "load_cpp at module level, next to its source, not inside forward")

_SIGNAL_HINTS = {
    "SIGSEGV": "an out-of-bounds read or write in the kernel (check every index against the "
               "sizes, tails included), or a write into its read-only inputs",
    "SIGBUS": "an access past the end of a mapping (an index past a tensor's end), or a write "
              "into its read-only inputs",
    "SIGFPE": "an integer division by zero or overflow in the kernel (a size of 0 or 1?)",
    "SIGABRT": "abort() was called: a failed assert, std::terminate or a C++ exception that "
               "left an extern \"C\" function; catch errors inside the kernel",
    "SIGILL": "an instruction this CPU does not have (use only the listed CPU flags)",
    "SIGKILL": "killed from outside its process (out of memory?)",
}


def exit_words(status: int) -> str:
    """How a process ended, from its `waitpid` status, with what most likely caused it."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.valid_signals() else str(sig)
        hint = _SIGNAL_HINTS.get(name)
        return f"died from {name}" + (f" ({hint})" if hint else "")
    code = os.WEXITSTATUS(status)
    if code == 70:  # candidate_proc._main: an exception escaped the command loop
        return ("exited with status 70 (an exception that is not an Exception escaped the "
                "candidate's code: SystemExit from sys.exit() or exit(), KeyboardInterrupt; "
                "never end the process)")
    return (f"exited with status {code} (the candidate's code or its library ended the "
            "process: exit(), os._exit(), std::exit(); return from forward instead)")


def how_it_ended(pid: int, wait_s: float = 2.0) -> tuple[str, bool]:
    """(how process `pid` ended, whether it has): reaped here if it has exited. Its channel
    closes a moment before it can be reaped, so a channel found closed waits up to `wait_s`."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return "ended", True
        if done:
            return exit_words(status), True
        if time.monotonic() >= deadline:
            return "stopped answering", False
        time.sleep(0.01)


def channel_closed(role: str, pid: int, during: str) -> str:
    """The channel reached its end (or broke) while an answer was awaited."""
    ended, exited = how_it_ended(pid)
    if exited:
        return f"the {role}'s process {ended} {during}"
    return (f"the {role}'s process closed its channel to the harness {during} but kept "
            "running: candidate code closed a file descriptor it did not open (close only "
            "what your module opened)")


def garbled(role: str, pid: int, during: str) -> str:
    """Bytes that are not a frame of the protocol arrived (or the channel broke mid-frame)."""
    ended, exited = how_it_ended(pid, wait_s=0.2)
    if exited:
        return f"the {role}'s process {ended} {during}"
    return (f"the {role}'s process wrote bytes that are not the harness's messages into its "
            f"channel to the harness {during}: candidate code wrote to a file descriptor it did "
            "not open (write only to what your module opened; print goes to the log)")


def unexpected(role: str, msg: dict[str, Any], during: str, expected: str,
               timed: bool = False) -> str:
    """A well-formed frame that is neither the answer awaited (`expected`) nor a failure. Only
    its keys are looked at, to name the kind of message; none of its text is quoted."""
    if role != "candidate":
        return f"the {role}'s process sent a message that is not {expected} {during}"
    if "service" in msg:
        return LATE_BUILD if timed else (
            f"the candidate's process asked for a library build {during}, where none is "
            "served; build every library at import (module level)")
    return (f"the candidate's process sent the harness a message that is not {expected} "
            f"{during}: candidate code wrote to the harness's channel or called the harness's "
            "own functions (use only kernelevolve.runtime's public functions)")
