"""How one job ended, as the driver establishes it from the server's reply and its own records.

The server's reply is untrusted bytes (it shares a sandbox with candidate code): `from_reply`
accepts only fields of the expected types and values, so a malformed reply becomes a failed
job with a reason, never an exception in the driver. Its text (the candidate's output tails,
reasons) is made inert here, where it enters the driver (harness/protocol/text.py).
"""
from __future__ import annotations

import math
import signal
from dataclasses import dataclass, field
from typing import Any

from kernelevolve.harness.protocol import codec as wire
from kernelevolve.harness.protocol.fields import MessageError
from kernelevolve.harness.protocol.replies import Failed, reply_from_wire
from kernelevolve.harness.protocol.stages import JOB_STAGES as STAGES
from kernelevolve.harness.protocol.text import clean, clean_tree

STATUSES = ("exited", "signaled", "timeout", "violation", "protocol")
TAIL_CHARS = 8192


@dataclass
class JobOutcome:
    status: str                 # ok | failed | crashed | timeout | violation | lost
    reply: Any = None           # the job's typed reply (harness/protocol/replies.py): Failed
                                # when the job failed for a reason it named
    stage: str = "start"
    code: int | None = None
    signal: int | None = None
    timeout: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0
    maxrss_kb: int = 0
    stderr_tail: str = ""
    stdout_tail: str = ""
    reason: str = ""            # violation, protocol or transport problem, in words
    syscall: str | None = None  # the call the syscall filter refused
    leftovers: int = 0          # processes of the job still alive when it ended (then killed)
    loaded: bool = False        # the job reached its "load" stage (candidate code may have run)
    services: list[dict[str, Any]] = field(default_factory=list)  # the driver's build log

    def describe(self) -> str:
        """How the child ended, in one sentence fit for a prompt."""
        if self.status == "violation":
            return self.reason
        if self.status == "timeout":
            which = "its total" if self.timeout == "total" else f"the {self.stage!r} stage's"
            return f"killed after exceeding {which} time limit ({self.wall_s:.1f} s) during {self.stage}"
        if self.status == "lost":
            return self.reason or "the worker server stopped answering and was restarted"
        if self.reason:
            return self.reason
        if self.signal is not None:
            name = signal.Signals(self.signal).name if self.signal in signal.valid_signals() else self.signal
            hint = {"SIGSEGV": " (segmentation fault: invalid memory access)",
                    "SIGBUS": " (bus error)", "SIGKILL": " (killed: memory or CPU limit?)",
                    "SIGXCPU": " (CPU-time limit exceeded)", "SIGABRT": " (aborted)",
                    "SIGFPE": " (arithmetic fault)",
                    "SIGSYS": " (the syscall filter refused a system call)",
                    "SIGXFSZ": " (result file size limit exceeded)"}.get(str(name), "")
            return f"the worker died from {name}{hint} during {self.stage}"
        if self.status == "crashed" and self.code == 0:
            return (f"the worker exited with status 0 before reporting a result, during "
                    f"{self.stage} (os._exit or sys.exit from candidate code?)")
        if self.status == "crashed":
            tail = self.stderr_tail.strip().splitlines()[-1:] or [""]
            return f"the worker exited with status {self.code} during {self.stage}: {tail[0]}"
        return self.status

    @property
    def result(self) -> dict[str, Any] | None:
        """The reply in its wire form (tools and tests that read it as data)."""
        return None if self.reply is None else self.reply.to_wire()

    @property
    def failure(self) -> Failed | None:
        return self.reply if isinstance(self.reply, Failed) else None

    @property
    def refused_library(self) -> dict[str, Any] | None:
        """The first library the driver's inspection refused during this job, if any."""
        return next((s for s in self.services if s.get("kind") == "inspection"), None)


def _num(value: Any, default: float = 0.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return default
    return float(value)


def _text(value: Any, limit: int = TAIL_CHARS) -> str:
    """The last `limit` characters of a text field, made inert; cut again after cleaning (an
    escape is up to ten characters wide), so a tail stays within its limit."""
    return clean(value[-limit:])[-limit:] if isinstance(value, str) else ""


def _small_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or not -(1 << 31) <= value < 1 << 31:
        return None
    return value


def from_reply(reply: dict[str, Any]) -> JobOutcome:
    """A JobOutcome (reply still None) from the server's reply, validated field by field."""
    status = reply.get("status")
    stage = reply.get("stage") if reply.get("stage") in STAGES else "start"
    out = JobOutcome(status="crashed", stage=stage,
                     code=_small_int(reply.get("code")), signal=_small_int(reply.get("signal")),
                     wall_s=_num(reply.get("wall_s")), cpu_s=_num(reply.get("cpu_s")),
                     maxrss_kb=int(_num(reply.get("maxrss_kb"))),
                     stderr_tail=_text(reply.get("stderr_tail")),
                     stdout_tail=_text(reply.get("stdout_tail")),
                     leftovers=int(_num(reply.get("leftovers"))),
                     loaded=reply.get("loaded") is not False)
    if status not in STATUSES:
        out.reason = "the worker server sent a malformed reply (unknown status)"
        return out
    if status == "timeout":
        out.status = "timeout"
        out.timeout = "total" if reply.get("timeout") == "total" else stage
    elif status == "violation":
        out.status = "violation"
        out.syscall = _text(reply.get("syscall"), 64) or None
        out.reason = _text(reply.get("reason"), 2000) or "the syscall filter refused a call"
    elif status == "protocol":
        out.reason = _text(reply.get("reason"), 500) or "the job broke the control protocol"
    return out


def read_result(out: JobOutcome, data: bytes, job: str) -> JobOutcome:
    """The job's result file, decoded (harness/protocol/codec.py), its strings made inert, and
    checked field by field as `job`'s reply; a malformed one leaves the job crashed, with why."""
    try:
        decoded = wire.decode(data)
    except wire.WireError as exc:
        out.reason = f"the job's result is malformed: {clean(str(exc))}"
        return out
    try:
        out.reply = reply_from_wire(job, clean_tree(decoded))
    except MessageError as exc:
        out.reason = f"the job's result is malformed: {clean(str(exc))[:500]}"
        return out
    out.status = "failed" if isinstance(out.reply, Failed) else "ok"
    return out
