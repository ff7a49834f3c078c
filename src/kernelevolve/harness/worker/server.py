"""The worker server: runs inside the sandbox, preloads torch once, forks a fresh child per job.

Protocol with the driver: one JSON object per line on stdin/stdout (harness/protocol/frames.py), plus a
unix socket (`--fd-socket`) on which the driver passes each job's result file descriptor. The
server answers `{"ready": ...}` at start (with what containment it has), then for each
`{"id", "job", "dir", "scratch", "limits"}` line it takes the job's descriptor, forks a child
(harness/worker/child.py), supervises it (harness/worker/supervise.py: stage limits, build requests relayed to
the driver, the syscall filter's refusals), kills whatever the job left running
(harness/containment/reaper.py) and answers with how the child ended. Forking from a warm server costs
~30 ms instead of ~1.5 s for a fresh interpreter that imports torch.

The server runs no candidate code and has no capabilities; its children cannot reach it (no
ptrace, no signals, no writes to its memory: harness/containment/seccomp.py and Landlock's scoping).
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import sys
import tempfile
from typing import Any

from kernelevolve import knobs
from kernelevolve.harness.containment import caps, reaper
from kernelevolve.harness.worker import child
from kernelevolve.harness.worker.supervise import DriverLink, Supervisor, kill_group


# Imported by jobs on demand; none starts a thread or touches a device at import, so forking
# after them is safe (the measure job's coordinator must fork before any thread pool starts).
JOB_MODULES = (
    "kernelevolve.types", "kernelevolve.harness.worker.measure", "kernelevolve.harness.worker.probe",
    "kernelevolve.harness.worker.proc_profile", "kernelevolve.harness.worker.shared_inputs",
    "kernelevolve.runtime.triton_guard",
    # pulled in by make_fx while the reference's decomposed ops are recorded
    "torch._inductor.compiler_bisector", "torch._inductor.fx_passes.dedupe_symint_uses",
)


def _probe_filter() -> str:
    """What the syscall filter can do here: notify (names refused calls), kill, or none."""
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            from kernelevolve.harness.containment import seccomp

            code = 0 if seccomp.install() is not None else 1
        except BaseException:  # noqa: BLE001
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 2
    return {0: "notify", 1: "kill"}.get(code, "none")


def _ready_facts(loaded: dict[str, Any], pid_namespace: bool, subreaper: bool) -> dict[str, Any]:
    from kernelevolve.harness.containment import landlock

    return {"ready": True, "pid": os.getpid(), "preloaded": loaded,
            "pid_namespace": pid_namespace, "subreaper": subreaper,
            "landlock_abi": landlock.abi_version(), "syscall_filter": _probe_filter(),
            "capabilities": caps.effective()}


def _job(msg: dict[str, Any], fdsock: socket.socket, driver: DriverLink,
         pid_namespace: bool) -> dict[str, Any]:
    job_id = msg.get("id")
    tag, fds, _, _ = socket.recv_fds(fdsock, 64, 2)
    if tag != f"job {job_id}".encode() or len(fds) != 1:
        for fd in fds:
            os.close(fd)
        return {"status": "protocol", "reason": "the job's result descriptor did not arrive"}
    result_fd = fds[0]
    scratch = msg.get("scratch")
    if isinstance(scratch, str) and os.path.isdir(scratch):
        msg = {**msg, "job_scratch": tempfile.mkdtemp(prefix="job-", dir=scratch)}
    ctl, ctl_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        child.run(msg, ctl_child, out_w, err_w, result_fd)
    ctl_child.close()
    for fd in (out_w, err_w, result_fd):
        os.close(fd)
    sup = Supervisor(pid, ctl, out_r, err_r, msg.get("limits", {}), job_id, driver,
                     kill=lambda: kill_group(pid))
    try:
        reply = sup.run()
    finally:
        ctl.close()
        for fd in (out_r, err_r, sup.listener):
            if fd is not None:
                os.close(fd)
    reply["leftovers"] = reaper.kill_leftovers(pid_namespace)
    if msg.get("job_scratch"):
        shutil.rmtree(msg["job_scratch"], ignore_errors=True)
    return reply


def serve(fd_socket: int) -> None:
    child.die_with_parent()
    caps.drop_all()
    subreaper = reaper.become_subreaper()
    pid_namespace = reaper.in_private_pid_namespace()
    driver = DriverLink(0, os.dup(1))
    os.dup2(2, 1)  # stray prints from imports go to the log, not the protocol channel
    fdsock = socket.socket(fileno=fd_socket)
    preload = knobs.preload_modules()
    loaded: dict[str, Any] = {}
    for mod in preload:
        try:
            __import__(mod)
            loaded[mod] = True
        except Exception as exc:  # noqa: BLE001 - an optional module; record why it is missing
            loaded[mod] = f"{type(exc).__name__}: {exc}"
    import kernelevolve.harness.worker.jobs  # noqa: F401  (imports what every child needs, once)
    for mod in JOB_MODULES:  # what jobs import lazily: once here, not in every child (inside
        try:                 # the sandbox no bytecode cache can be written, so a child
            __import__(mod)  # compiled each of these from source: ~40-100 ms a measure job)
        except Exception:  # noqa: BLE001 - the job that needs it reports the failure itself
            pass
    from kernelevolve import plugins

    plugins.platforms(), plugins.languages()  # the registry, read once: children inherit it

    driver.send(_ready_facts(loaded, pid_namespace, subreaper))
    while True:
        msg = driver.next_message()
        if msg is None or msg.get("job") == "exit":
            break
        reply = _job(msg, fdsock, driver, pid_namespace)
        reply["id"] = msg.get("id")
        driver.send(reply)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kernelevolve.harness.worker.server")
    parser.add_argument("--fd-socket", type=int, required=True)
    serve(parser.parse_args(argv).fd_socket)
    # Every job's processes were reaped with it; what is left is the interpreter's own teardown
    # (torch's and every preloaded module's finalisers: ~0.8 s that each pool's close waited
    # for). Nothing here needs it: flush what was printed and leave.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
