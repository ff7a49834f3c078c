"""The forked job child: everything between `fork` and the job, and the job's channel.

In order, each step before any candidate code exists:
1. its own process group, death with the server, stdin from /dev/null, stdout and stderr into
   the server's pipes (the server keeps their tails; no log file exists to be swapped);
2. every other inherited descriptor closed: the server's protocol channel to the driver, the
   descriptor-passing socket, other jobs' leftovers. What stays: the control socket to the
   server and the result file the driver opened;
3. limits: no core dumps, address space, CPU time, file size (the result file);
4. Landlock (harness/landlock.py), while the process has one thread: writes beneath the
   scratch only, reads beneath the driver's allowlist only (`containment["readable"]`);
5. the job; right before the candidate is imported it calls `contain()`: the syscall filter on
   every thread (harness/seccomp.py), its listener handed to the server, which acknowledges.
"""
from __future__ import annotations

import os
import resource
import signal
import socket
import sys
from typing import Any

from kernelevolve.harness import frames

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


def close_other_fds(keep: set[int]) -> None:
    top = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = top if 0 < top < (1 << 20) else 1 << 16
    low = 3
    for fd in sorted(k for k in keep if k >= 3) + [top]:
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1


def _job_folders(req: dict[str, Any], containment: dict[str, Any]) -> str:
    """Where the job may write (Landlock) and its temporary files go. A job whose candidate
    compiles in its own process (the jit profile) gets only its own folder, which the server
    made for it and removes after it, and its compilers' caches live there too; other jobs may
    write anywhere in the sandbox's scratch (trusted work before the candidate is imported, such
    as compiling the torch.compile baseline; candidate code itself cannot write at all)."""
    import tempfile

    scratch = req.get("scratch") or req["dir"]
    own = req.get("job_scratch") or scratch
    writable = own if containment.get("profile") == "jit" else scratch
    os.environ["TMPDIR"] = own
    tempfile.tempdir = None  # the server's Python may have looked it up already
    if containment.get("profile") == "jit":
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(own, "inductor")
        from kernelevolve.plugins import cache_env, get_platform

        for var, sub in cache_env(get_platform(req["platform"])).items():
            os.environ[var] = os.path.join(own, sub)
    return writable


class Containable:
    """`contain()` for a context with `containment`, `contained` and `hand_over_listener`."""

    def contain(self) -> None:
        """The syscall filter, on every thread, before candidate code runs."""
        if self.contained or not self.containment.get("seccomp", True):
            self.contained = True
            return
        from kernelevolve.harness import seccomp

        listener = seccomp.install(seccomp.PROFILES.get(self.containment.get("profile"),
                                                        seccomp.STRICT))
        if listener is not None:
            self.hand_over_listener(listener)
        self.contained = True


class JobContext(Containable):
    """What a job gets from its child: the request, stage reports, the build service, the
    containment step and the result file."""

    def __init__(self, request: dict[str, Any], ctl: socket.socket, result_fd: int):
        self.request, self.ctl, self.result_fd = request, ctl, result_fd
        self.timeouts = request.get("stage_timeouts", {})
        self.containment = request.get("containment", {})
        self.contained = False

    def stage(self, name: str) -> None:
        frames.send_frame(self.ctl, {"stage": name, "timeout": self.timeouts.get(name, 60)})

    def build(self, source: str, flags: tuple[str, ...], name: str) -> dict[str, Any]:
        return self.service({"op": "compile", "source": source, "flags": list(flags),
                             "name": name})

    def service(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request to the driver's build service, relayed by the server."""
        frames.send_frame(self.ctl, {"service": request})
        reply = frames.recv_frame(self.ctl)
        return reply.get("reply") if isinstance(reply.get("reply"), dict) else {}

    def hand_over_listener(self, listener: int) -> None:
        """Give the syscall filter's listener to the server (it closes our copy)."""
        frames.send_frame(self.ctl, {"listener": True}, [listener])
        os.close(listener)
        ack = frames.recv_frame(self.ctl)
        if ack.get("ack") != "listener":
            raise RuntimeError("the worker server did not take the syscall listener")

    def write_result(self, data: bytes) -> None:
        os.ftruncate(self.result_fd, 0)
        view, offset = memoryview(data), 0
        while offset < len(view):
            offset += os.pwrite(self.result_fd, view[offset:offset + (1 << 26)], offset)


def run(req: dict[str, Any], ctl: socket.socket, out_fd: int, err_fd: int,
        result_fd: int) -> None:
    """The child's whole life; never returns. `req`: the server's job line (dir, limits,
    scratch, containment); the job's own parameters are in `dir/request.json`."""
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
        os.chdir(req["dir"])
        import json

        with open("request.json") as fh:
            req = {**json.load(fh), **req}
        containment = req.get("containment", {})
        writable = _job_folders(req, containment)
        apply_limits(req.get("limits", {}))
        if containment.get("landlock", True):
            from kernelevolve.harness import landlock

            # /dev/null: subprocesses of a jit job's compilers write their noise there
            landlock.restrict_self(landlock.Restriction(
                writable=(writable,),
                devices=("/dev/null", *containment.get("devices", [])),
                readable=tuple(containment.get("readable", ()))))
        from kernelevolve.harness import jobs

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
