"""The forked job child: everything between `fork` and the job, and the job's channel.

In order, each step before any candidate code exists:
1. its own process group, death with the server, stdin from /dev/null, stdout and stderr into
   the server's pipes (the server keeps their tails; no log file exists to be swapped);
2. every other inherited descriptor closed: the server's protocol channel to the driver, the
   descriptor-passing socket, other jobs' leftovers. What stays: the control socket to the
   server and the result file the driver opened;
3. limits: no core dumps, address space, CPU time, file size (the result file);
4. Landlock (harness/containment/landlock.py), while the process has one thread: writes beneath the
   scratch only, reads beneath the driver's allowlist only (`containment["readable"]`);
5. the job; right before the candidate is imported it calls `contain()`: the syscall filter on
   every thread (harness/containment/seccomp.py), its listener handed to the server, which acknowledges.
"""
from __future__ import annotations

import os
import resource
import signal
import socket
import sys
from typing import Any

from kernelevolve.harness.protocol.messages import JobRequest
from kernelevolve.harness.worker.context import JobContext, close_other_fds

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # noqa: BLE001 - not Linux: the driver kills us explicitly on close
        pass


def _vm_size_bytes() -> int:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def apply_limits(limits: dict[str, Any]) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    mem = limits.get("memory_bytes")
    if mem:
        # The child inherits the server's mappings (torch alone maps ~1 GB of address space),
        # so the limit is on top of what is already there.
        cap = _vm_size_bytes() + int(mem)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    cpu = limits.get("cpu_seconds")
    if cpu:
        used = int(sum(os.times()[:2]))
        resource.setrlimit(resource.RLIMIT_CPU, (used + int(cpu), used + int(cpu) + 5))
    size = limits.get("result_bytes")
    if size:
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(size), int(size)))


def _job_folders(line: dict[str, Any], req: JobRequest) -> str:
    """Where the job may write (Landlock) and its temporary files go. A job whose candidate
    compiles in its own process (the jit profile) gets only its own folder, which the server
    made for it and removes after it, and its compilers' caches live there too; other jobs may
    write anywhere in the sandbox's scratch (trusted work before the candidate is imported, such
    as compiling the torch.compile baseline; candidate code itself cannot write at all)."""
    import tempfile

    scratch = line.get("scratch") or line["dir"]
    own = line.get("job_scratch") or scratch
    jit = req.containment.profile == "jit"
    writable = own if jit else scratch
    os.environ["TMPDIR"] = own
    tempfile.tempdir = None  # the server's Python may have looked it up already
    if jit:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(own, "inductor")
        from kernelevolve.plugins import cache_env, get_platform

        for var, sub in cache_env(get_platform(req.platform)).items():
            os.environ[var] = os.path.join(own, sub)
    return writable


def run(line: dict[str, Any], ctl: socket.socket, out_fd: int, err_fd: int,
        result_fd: int) -> None:
    """The child's whole life; never returns. `line`: the server's job line (dir, limits,
    scratch); the job's request (harness/protocol/messages.py) is in `dir/request.json`."""
    code = 70
    try:
        os.setpgid(0, 0)
        die_with_parent()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        close_other_fds({ctl.fileno(), result_fd})
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.chdir(line["dir"])
        import json

        with open("request.json") as fh:
            req = JobRequest.from_wire(json.load(fh))
        containment = req.containment
        writable = _job_folders(line, req)
        apply_limits(line.get("limits", {}))
        if containment.landlock:
            from kernelevolve.harness.containment import landlock

            # /dev/null: subprocesses of a jit job's compilers write their noise there
            landlock.restrict_self(landlock.Restriction(
                writable=(writable,),
                devices=("/dev/null", *containment.devices),
                readable=containment.readable))
        from kernelevolve.harness.worker import jobs

        jobs.main(JobContext(req, ctl, result_fd))
        code = 0
    except BaseException:  # noqa: BLE001 - report anything, the server decides
        import traceback

        traceback.print_exc()
        code = 70
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
