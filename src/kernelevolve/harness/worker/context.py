"""What a job holds inside its forked child: the request, stage reports to the server, the build
service relayed through it, the containment step (`contain()`) and the result file. Shared by the
jobs, the measure coordinator and the timed processes (harness/worker/child.py makes one)."""
from __future__ import annotations

import os
import resource
import socket
from typing import Any

from kernelevolve.harness.protocol import frames
from kernelevolve.harness.protocol.messages import JobRequest


def close_other_fds(keep: set[int]) -> None:
    top = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    top = top if 0 < top < (1 << 20) else 1 << 16
    low = 3
    for fd in sorted(k for k in keep if k >= 3) + [top]:
        if fd > low:
            os.closerange(low, fd)
        low = fd + 1


class Containable:
    """`contain()` for a context with `containment`, `contained` and `hand_over_listener`."""

    def contain(self) -> None:
        """The syscall filter, on every thread, before candidate code runs."""
        if self.contained or not self.containment.seccomp:
            self.contained = True
            return
        from kernelevolve.harness.containment import seccomp

        listener = seccomp.install(seccomp.PROFILES.get(self.containment.profile, seccomp.STRICT))
        if listener is not None:
            self.hand_over_listener(listener)
        self.contained = True


class JobContext(Containable):
    """What a job gets from its child: the request, stage reports, the build service, the
    containment step and the result file."""

    def __init__(self, request: JobRequest, ctl: socket.socket, result_fd: int):
        self.request, self.ctl, self.result_fd = request, ctl, result_fd
        self.timeouts = request.stage_timeouts
        self.containment = request.containment
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
