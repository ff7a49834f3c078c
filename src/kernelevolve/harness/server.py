"""The worker server: runs inside the sandbox, preloads torch once, forks a fresh child per job.

Protocol (driver <-> server): one JSON object per line. The server answers `{"ready": ...}` at
start, then for each request `{"job": kind, "dir": jobdir, "limits": {...}}` forks a child, which
reads `jobdir/request.json`, writes `jobdir/result.bin` (harness/wire.py, never pickle) and exits.
The child reports the stage it is in on a pipe; the server enforces each stage's timeout, kills
the child's process group on expiry, and answers with how the child ended. Forking from a warm
server costs ~30 ms instead of ~1.5 s for a fresh interpreter that imports torch.
"""
from __future__ import annotations

import json
import os
import select
import signal
import sys
import time

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:  # not Linux: the driver kills us explicitly on close
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


def _apply_limits(limits: dict) -> None:
    import resource

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


def _child(req: dict, progress_fd: int) -> None:
    """Runs in the forked child; never returns."""
    code = 70
    try:
        os.setpgid(0, 0)
        _die_with_parent()
        jobdir = req["dir"]
        os.chdir(jobdir)
        fd_in = os.open(os.devnull, os.O_RDONLY)
        os.dup2(fd_in, 0)
        out = os.open(os.path.join(jobdir, "stdout.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        err = os.open(os.path.join(jobdir, "stderr.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        os.environ["TMPDIR"] = jobdir
        _apply_limits(req.get("limits", {}))
        from kernelevolve.harness import jobs

        jobs.main(jobdir, progress_fd)
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


def _supervise(pid: int, progress_fd: int, limits: dict) -> dict:
    """Wait for the child, enforcing per-stage timeouts announced on the progress pipe."""
    start = time.monotonic()
    stage_timeouts = limits.get("stage_timeouts", {})
    total = float(limits.get("total_timeout", 600))
    stage, stage_deadline = "start", start + float(stage_timeouts.get("start", 60))
    buf, open_pipe, timed_out = b"", True, None
    while True:
        now = time.monotonic()
        deadline = min(stage_deadline, start + total)
        if now >= deadline:
            timed_out = "total" if now >= start + total else stage
            break
        if open_pipe:
            ready, _, _ = select.select([progress_fd], [], [], min(0.2, deadline - now))
            if ready:
                chunk = os.read(progress_fd, 4096)
                if not chunk:
                    open_pipe = False
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    parts = line.decode(errors="replace").split()
                    if len(parts) == 2 and parts[0] in stage_timeouts:
                        stage = parts[0]
                        stage_deadline = time.monotonic() + min(float(parts[1]),
                                                                float(stage_timeouts[stage]))
        else:
            time.sleep(0.005)
        done, status, rusage = os.wait4(pid, os.WNOHANG)
        if done:
            break
    if timed_out:
        _kill_group(pid)
        _, status, rusage = os.wait4(pid, 0)
    _kill_group(pid)  # leftovers the candidate may have spawned
    os.close(progress_fd)
    reply = {"stage": stage, "wall_s": time.monotonic() - start,
             "maxrss_kb": rusage.ru_maxrss, "cpu_s": rusage.ru_utime + rusage.ru_stime}
    if timed_out:
        reply.update(status="timeout", timeout=timed_out)
    elif os.WIFSIGNALED(status):
        reply.update(status="signaled", signal=os.WTERMSIG(status))
    else:
        reply.update(status="exited", code=os.WEXITSTATUS(status))
    return reply


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def serve() -> None:
    _die_with_parent()
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray prints from imports go to the log, not the protocol channel
    preload = [m for m in os.environ.get("KERNELEVOLVE_PRELOAD", "torch").split(",") if m]
    loaded = {}
    for mod in preload:
        try:
            __import__(mod)
            loaded[mod] = True
        except Exception as exc:  # noqa: BLE001 - an optional module; record why it is missing
            loaded[mod] = f"{type(exc).__name__}: {exc}"
    import kernelevolve.harness.jobs  # noqa: F401  (imports what every child needs, once)

    proto.write(json.dumps({"ready": True, "pid": os.getpid(), "preloaded": loaded}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("job") == "exit":
            break
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            _child(req, w)
        os.close(w)
        reply = _supervise(pid, r, req.get("limits", {}))
        reply["id"] = req.get("id")
        proto.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    serve()
