"""No process outlives its job: the worker server kills whatever a finished job left behind.

A job's child may have escaped its process group and session (`setsid`, double fork) before the
syscall filter went on, or in a run with the filter off. Two mechanisms, whichever applies:

- In its own PID namespace (bubblewrap's `--unshare-pid`: the server is pid 2 under bwrap's
  init), `kill(-1, SIGKILL)` reaches every process of the namespace except the caller and init,
  in one pass the kernel makes under the task-list lock, so a forking process cannot slip out.
- Elsewhere the server is a child subreaper (PR_SET_CHILD_SUBREAPER): orphans of a job are
  re-parented to it, whatever they did to their session, and it kills its children until none
  is left. `kill(-1)` is never used outside a private namespace (it would reach every process
  of the user).
"""
from __future__ import annotations

import ctypes
import os
import signal
import time

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def in_private_pid_namespace() -> bool:
    """True only under bubblewrap's PID namespace: our parent is pid 1 and pid 1 is bwrap."""
    try:
        with open("/proc/1/comm") as fh:
            init = fh.read().strip()
    except OSError:
        return False
    return os.getppid() == 1 and init == "bwrap" and os.getpid() <= 16


def children() -> list[int]:
    """Processes whose parent is this one (read from /proc; includes re-parented orphans)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses, so split after it
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me:
            found.append(int(entry))
    return found


def kill_leftovers(pid_namespace: bool, rounds: int = 50) -> int:
    """Kill every process a job left; returns how many were found. Reaps them too."""
    killed = 0
    if pid_namespace:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(rounds):
        left = children()
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        _reap()
        time.sleep(0.001)
    _reap()
    return killed


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
