"""The worker server's watch over one job child, from outside the child's process.

One `select` loop over: the child's control socket (stage reports, build requests, the syscall
filter's listener), its stdout and stderr pipes (only their tails are kept, so a chatty or
hostile child fills no disk and no memory), the filter's listener (a refused call: name it, kill
the job), and the driver's channel (answers to build requests). It enforces each stage's time
limit and the job's total, and answers with how the child ended. Anything malformed the child
sends is a protocol violation that kills the job; it never reaches the driver as bytes to parse.
"""
from __future__ import annotations

import os
import select
import signal
import socket
import time
from typing import Any, Callable

from kernelevolve.harness.protocol import frames
from kernelevolve.harness.containment import violations

TAIL_BYTES = 8192


class DriverLink:
    """The server's end of the driver's line protocol (stdin in, a dup of stdout out)."""

    def __init__(self, in_fd: int, out_fd: int):
        self.in_fd, self.out_fd = in_fd, out_fd
        self.reader = frames.LineReader()
        self.pending: list[dict[str, Any]] = []

    def send(self, msg: dict[str, Any]) -> None:
        data = frames.dump_line(msg)
        while data:
            data = data[os.write(self.out_fd, data):]

    def pump(self) -> bool:
        """Read what the driver sent; False when it closed the channel."""
        chunk = os.read(self.in_fd, 1 << 20)
        if not chunk:
            return False
        self.pending += [frames.parse(line) for line in self.reader.feed(chunk) if line.strip()]
        return True

    def next_message(self, block: bool = True) -> dict[str, Any] | None:
        while not self.pending:
            if not block or not self.pump():
                return None
        return self.pending.pop(0)


class Supervisor:
    def __init__(self, pid: int, ctl: socket.socket, out_fd: int, err_fd: int,
                 limits: dict[str, Any], job_id: Any, driver: DriverLink,
                 kill: Callable[[], None]):
        self.pid, self.ctl, self.job_id, self.driver, self._kill = pid, ctl, job_id, driver, kill
        self.stage_timeouts = {k: float(v) for k, v in limits.get("stage_timeouts", {}).items()}
        self.total = float(limits.get("total_timeout", 600))
        self.streams = {out_fd: bytearray(), err_fd: bytearray()}
        self.names = {out_fd: "stdout_tail", err_fd: "stderr_tail"}
        self.ctl_reader = frames.FrameReader()
        self.listener: int | None = None
        self.service_pending = False
        self.violation: violations.Violation | None = None
        self.protocol_error: str | None = None
        self.stage = "start"
        self.loaded = False   # once "load" is reported, candidate code may run: never reset

    def run(self) -> dict[str, Any]:
        start = time.monotonic()
        stage_deadline = start + self.stage_timeouts.get("start", 60)
        open_fds = {self.ctl.fileno(), *self.streams}
        # Readable once the child has exited: with its descriptors all closed there is nothing
        # else to wake on, and a plain timeout would add up to 0.2 s to every job.
        try:
            exited: int | None = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            exited = None
        try:
            return self._loop(start, stage_deadline, open_fds, exited)
        finally:
            if exited is not None:
                os.close(exited)

    def _loop(self, start: float, stage_deadline: float, open_fds: set[int],
              exited: int | None) -> dict[str, Any]:
        timed_out, status, rusage = None, 0, None
        while True:
            now = time.monotonic()
            deadline = min(stage_deadline, start + self.total)
            if now >= deadline:
                timed_out = "total" if now >= start + self.total else self.stage
                break
            watch = list(open_fds) + ([self.listener] if self.listener is not None else []) \
                + ([exited] if exited is not None else [])
            if self.service_pending:
                watch.append(self.driver.in_fd)
            ready, _, _ = select.select(watch, [], [], min(0.2, deadline - now))
            for fd in ready:
                if fd == exited:
                    continue  # the wait4 below collects it
                if fd == self.listener:
                    self._on_violation()
                elif fd == self.driver.in_fd:
                    self._on_driver()
                elif fd == self.ctl.fileno():
                    new_deadline = self._on_ctl(open_fds)
                    if new_deadline is not None:
                        stage_deadline = new_deadline
                else:
                    self._on_stream(fd, open_fds)
            if self.violation or self.protocol_error:
                self._kill()
            done, status, rusage = os.wait4(self.pid, os.WNOHANG)
            if done:
                break
        if timed_out or not done:
            self._kill()
            _, status, rusage = os.wait4(self.pid, 0)
        self._kill()
        self._drain()
        reply: dict[str, Any] = {"stage": self.stage, "loaded": self.loaded,
                                 "wall_s": time.monotonic() - start,
                                 "maxrss_kb": rusage.ru_maxrss,
                                 "cpu_s": rusage.ru_utime + rusage.ru_stime}
        for fd, buf in self.streams.items():
            reply[self.names[fd]] = bytes(buf).decode(errors="replace")
        if self.violation:
            reply.update(status="violation", syscall=self.violation.syscall,
                         reason=self.violation.reason())
        elif self.protocol_error:
            reply.update(status="protocol", reason=self.protocol_error)
        elif timed_out:
            reply.update(status="timeout", timeout=timed_out)
        elif os.WIFSIGNALED(status):
            reply.update(status="signaled", signal=os.WTERMSIG(status))
        else:
            reply.update(status="exited", code=os.WEXITSTATUS(status))
        return reply

    # ---- events --------------------------------------------------------------------------
    def _on_violation(self) -> None:
        found = violations.receive(self.listener)
        if found is None:  # the filter's last user is gone
            os.close(self.listener)
            self.listener = None
        elif found is not True and self.violation is None:
            self.violation = found

    def _on_driver(self) -> None:
        if not self.driver.pump():
            self.protocol_error = "the driver closed the channel"
            return
        while self.driver.pending:
            msg = self.driver.pending.pop(0)
            if msg.get("id") == self.job_id and "service_reply" in msg and self.service_pending:
                self.service_pending = False
                try:
                    frames.send_frame(self.ctl, {"reply": msg["service_reply"]})
                except OSError:
                    pass

    def _on_ctl(self, open_fds: set[int]) -> float | None:
        try:
            data, fds, _, _ = socket.recv_fds(self.ctl, 1 << 20, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            open_fds.discard(self.ctl.fileno())
            for fd in fds:
                os.close(fd)
            return None
        deadline = None
        try:
            for msg in self.ctl_reader.feed(data):
                deadline = self._on_frame(msg, fds) or deadline
        except frames.FrameError as exc:
            self.protocol_error = (f"the job sent a malformed control message ({exc}): "
                                   "candidate code wrote to a file descriptor it did not open "
                                   "(write only to what your module opened)")
        for fd in fds:
            os.close(fd)
        return deadline

    def _on_frame(self, msg: dict[str, Any], fds: list[int]) -> float | None:
        if "stage" in msg:
            name, timeout = msg.get("stage"), msg.get("timeout")
            if name not in self.stage_timeouts or not isinstance(timeout, (int, float)) \
                    or timeout != timeout:
                self.protocol_error = f"the job reported an unknown stage {str(name)[:40]!r}"
                return None
            self.stage = name
            self.loaded = self.loaded or name != "problem"
            return time.monotonic() + min(max(float(timeout), 0.0), self.stage_timeouts[name])
        if "service" in msg and not self.service_pending:
            self.service_pending = True
            self.driver.send({"id": self.job_id, "service": msg["service"]})
        elif msg.get("listener") is True and fds and self.listener is None:
            self.listener = fds.pop(0)
            frames.send_frame(self.ctl, {"ack": "listener"})
        else:
            self.protocol_error = ("the job sent a control message out of turn: candidate "
                                   "code wrote to the harness's channel or called the "
                                   "harness's own functions (use only kernelevolve.runtime's "
                                   "public functions)")
        return None

    def _on_stream(self, fd: int, open_fds: set[int]) -> None:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            open_fds.discard(fd)
            return
        buf = self.streams[fd]
        buf += chunk
        if len(buf) > TAIL_BYTES:
            del buf[:len(buf) - TAIL_BYTES]

    def _drain(self) -> None:
        for fd in self.streams:
            os.set_blocking(fd, False)
            for _ in range(64):
                try:
                    chunk = os.read(fd, 1 << 16)
                except OSError:
                    break
                if not chunk:
                    break
                buf = self.streams[fd]
                buf += chunk
                if len(buf) > TAIL_BYTES:
                    del buf[:len(buf) - TAIL_BYTES]


def kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
