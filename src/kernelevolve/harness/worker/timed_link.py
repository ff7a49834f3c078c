"""The coordinator's side of a timed process in a measure job (harness/worker/measure.py): its
commands, its CPU clock read from outside, and its memory read through /proc/<pid>/mem.

The processes themselves are in harness/worker/candidate_proc.py.
"""
from __future__ import annotations

import errno
import os
import time
from typing import Any

from kernelevolve.harness.protocol import frames
from kernelevolve.harness.worker import link_faults
from kernelevolve.harness.protocol.stages import CANDIDATE_STAGES
from kernelevolve.harness.protocol.tensor_bytes import from_bytes
from kernelevolve.harness.worker.context import JobContext
from kernelevolve.harness.worker.session import JobFailure


class TimedProcess:
    """The coordinator's view of a timed process: commands, its CPU clock, its memory."""

    def __init__(self, pid: int, link, role: str):
        self.pid, self.link, self.role = pid, link, role
        self._mem: int | None = None

    def wait_ready(self) -> dict[str, Any]:
        """The reference process's answer once its models are built (and compiled)."""
        try:
            msg = frames.recv_frame(self.link)
        except (frames.FrameError, OSError):
            raise RuntimeError(f"the reference process {self.ended()} while building the "
                               "reference") from None
        if msg.get("ready") is not True:
            raise RuntimeError(link_faults.unexpected(self.role, msg, "while building the "
                                                      "reference", "its ready message"))
        return msg

    # ---- the load phase: relay stage reports, builds and the filter's listener -----------
    def relay_load(self, ctx: JobContext) -> None:
        import socket

        while True:
            try:
                data, fds, _, _ = socket.recv_fds(self.link, 1 << 20, 2)
            except OSError:
                data, fds = b"", []
            if not data:
                raise JobFailure("load", link_faults.channel_closed(self.role, self.pid,
                                                                    "while loading"))
            msgs = self._frames(data)
            for msg in msgs:
                if "stage" in msg and msg["stage"] in ("load", "run"):
                    ctx.stage(msg["stage"])
                elif "service" in msg:
                    frames.send_frame(self.link, {"reply": ctx.service(msg["service"])})
                elif msg.get("listener") is True and fds:
                    ctx.hand_over_listener(fds.pop(0))
                    frames.send_frame(self.link, {"ack": "listener"})
                elif msg.get("ready") is True:
                    for fd in fds:
                        os.close(fd)
                    return
                elif isinstance(msg.get("failed"), dict):
                    raise _failure(msg["failed"], "load")
                else:
                    raise JobFailure("load", link_faults.unexpected(
                        self.role, msg, "while loading", "a load stage's report"))
            for fd in fds:
                os.close(fd)

    def _frames(self, data: bytes) -> list[dict[str, Any]]:
        reader = getattr(self, "_reader", None) or frames.FrameReader()
        self._reader = reader
        try:
            return reader.feed(data)
        except frames.FrameError:
            raise JobFailure("load", link_faults.garbled(self.role, self.pid,
                                                         "while loading")) from None

    # ---- timed work --------------------------------------------------------------------------
    def cpu_s(self) -> float:
        """The candidate process's CPU time, all its threads (exited ones too), read from here."""
        try:
            return time.clock_gettime(((~self.pid) << 3) | 2)  # MAKE_PROCESS_CPUCLOCK(SCHED)
        except OSError:
            return float("nan")

    def send_sets(self, case: str, shared) -> None:
        frames.send_frame(self.link, {"op": "sets", "case": case, "spec": shared.spec()},
                          [shared.fd])
        self._expect("attached")

    def batch(self, case: str, indices: list[int], numbers: dict[str, Any],
              model: str = "ref") -> dict[str, Any]:
        frames.send_frame(self.link, {"op": "batch", "case": case, "sets": indices,
                                      "numbers": numbers, "model": model})
        return self._expect("done")

    def first_call(self, case: str, indices: list[int], numbers: dict[str, Any],
                   ctx: JobContext | None) -> dict[str, Any]:
        """The candidate's first call of a case, untimed: what forward does once (a library
        it builds lazily with load_cpp) happens here, its build requests relayed to the build
        service as at load, before any batch of the case is timed."""
        frames.send_frame(self.link, {"op": "batch", "case": case, "sets": indices,
                                      "numbers": numbers, "model": "ref", "first": True})
        while True:
            msg = self._recv("during its first, untimed call")
            if "service" in msg and ctx is not None:
                frames.send_frame(self.link, {"reply": ctx.service(msg["service"])})
                continue
            return self._answer(msg, "done", "during its first, untimed call")

    def _expect(self, key: str) -> dict[str, Any]:
        during = "during a timed batch" if key == "done" else "during timing"
        return self._answer(self._recv(during), key, during, timed=key == "done")

    def _recv(self, during: str) -> dict[str, Any]:
        try:
            return frames.recv_frame(self.link)
        except OSError:
            raise JobFailure("timing", link_faults.channel_closed(self.role, self.pid,
                                                                  during)) from None
        except frames.FrameError as exc:
            closed = "closed mid-frame" in str(exc)
            raise JobFailure("timing", (link_faults.channel_closed if closed else
                                        link_faults.garbled)(self.role, self.pid, during)) \
                from None

    def _answer(self, msg: dict[str, Any], key: str, during: str,
                timed: bool = False) -> dict[str, Any]:
        if isinstance(msg.get("failed"), dict):
            if self.role == "reference":
                raise JobFailure("problem", "the reference failed during timing: "
                                 + str(msg["failed"].get("reason"))[:20000])
            raise _failure(msg["failed"], "timing")
        if msg.get(key) is not True:
            stage = "problem" if self.role == "reference" else "timing"
            raise JobFailure(stage, link_faults.unexpected(
                self.role, msg, during, "its answer", timed))
        return msg

    def request_outputs(self, call: int, select: list[Any]) -> None:
        """Ask the reference process (trusted) for the outputs of one kept call: the elements
        `select` names per output (harness/protocol/sampled_outputs.py; None: all of it). The answer is
        read by `outputs()`, so the coordinator can read the candidate's meanwhile."""
        frames.send_frame(self.link, {"op": "outputs", "call": call, "select": select})

    def outputs(self) -> list[Any] | None:
        msg = frames.recv_frame(self.link)
        if msg.get("outputs") is not True:
            return None
        return [from_bytes(frames.recv_exact(self.link, nbytes) if nbytes else b"",
                           dtype).view(shape) for dtype, shape, nbytes in msg["layout"]]

    def read(self, address: Any, nbytes: int) -> bytes | None:
        """Bytes of the candidate's memory, read from outside it."""
        if not isinstance(address, int) or address <= 0 or nbytes < 0:
            return None
        try:
            if self._mem is None:
                self._mem = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
            data = os.pread(self._mem, nbytes, address)
        except (OSError, OverflowError, ValueError):
            return None
        return data if len(data) == nbytes else None

    def read_runs(self, runs: list[tuple[int, int]]) -> bytes | None:
        """Runs of the candidate's memory (address, length), read back to back: one
        process_vm_readv per 1024 runs where the kernel allows it, else one read per run. None
        if any byte is not mapped."""
        total = sum(n for _, n in runs)
        out = bytearray(total)
        done = _readv(self.pid, runs, out) if len(runs) > 1 else None
        if done is None:  # one run, or process_vm_readv refused: the /proc/<pid>/mem reads
            at = 0
            for address, n in runs:
                data = self.read(address, n)
                if data is None:
                    return None
                out[at:at + n] = data
                at += n
        elif not done:
            return None
        return bytes(out)

    def ended(self) -> str:
        try:
            done, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return "ended"
        if not done:
            return "stopped answering"
        return link_faults.exit_words(status)

    def request_exit(self) -> None:
        """Tell the process to end (idempotent); `close` waits for it. Both processes are told
        first, then waited for, so that they exit at the same time."""
        if self.link.fileno() < 0:
            return
        try:
            frames.send_frame(self.link, {"op": "exit"})
        except OSError:
            pass
        self.link.close()

    def close(self) -> None:
        self.request_exit()
        if self._mem is not None:
            os.close(self._mem)
            self._mem = None
        if _exited_within(self.pid, 1.0):
            return
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)


def _exited_within(pid: int, timeout_s: float) -> bool:
    """Whether `pid` ended (and was reaped) within `timeout_s`. Woken by the process's pidfd
    the moment it exits (a 10 ms polling sleep cost ~15 ms per process per measure job),
    polling only where pidfds are not available."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                return True
            if done:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if fd is not None:
                select.select([fd], [], [], left)
            else:
                time.sleep(min(0.002, left))
    finally:
        if fd is not None:
            os.close(fd)


_IOV_MAX = 1024


def _readv(pid: int, runs: list[tuple[int, int]], out: bytearray) -> bool | None:
    """process_vm_readv of `runs` into `out`: True, False where memory is not mapped, None where
    the call itself is not available (then the caller reads /proc/<pid>/mem)."""
    import ctypes

    import numpy as np

    libc = _libc()
    fn = getattr(libc, "process_vm_readv", None) if libc is not None else None
    if fn is None:
        return None
    local = (ctypes.c_char * len(out)).from_buffer(out)
    base = ctypes.addressof(local)
    at = 0
    for first in range(0, len(runs), _IOV_MAX):
        chunk = runs[first:first + _IOV_MAX]
        remote = np.asarray(chunk, dtype=np.uint64).reshape(-1, 2)
        want = int(remote[:, 1].sum())
        lvec = (ctypes.c_uint64 * 2)(base + at, want)
        got = fn(pid, lvec, 1, ctypes.c_void_p(remote.ctypes.data), len(chunk), 0)
        if got < 0:
            err = ctypes.get_errno()
            if err in (errno.ENOSYS, errno.EPERM, errno.EACCES) and first == 0:
                return None
            return False
        if got != want:
            return False
        at += want
    return True


def _libc():
    import ctypes

    global _LIBC
    if _LIBC is None:
        try:
            _LIBC = ctypes.CDLL(None, use_errno=True)
            _LIBC.process_vm_readv.restype = ctypes.c_ssize_t
            _LIBC.process_vm_readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong,
                                               ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        except (OSError, AttributeError):
            _LIBC = False
    return _LIBC or None


_LIBC = None


def _failure(failed: dict[str, Any], default_stage: str) -> JobFailure:
    stage = failed.get("stage") if failed.get("stage") in CANDIDATE_STAGES else \
        default_stage
    reason = failed.get("reason")
    return JobFailure(stage, reason[:20000] if isinstance(reason, str) and reason else
                      "the candidate's process failed without a reason")


def threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0
