"""What an LLM call gives back: a `Completion`, a `CallRecord` for the store, or an `LLMError`.

Plain data, kept apart from the client (client.py) that fills it in. Nothing here may hold the
API key: the client scrubs every text before it lands in one of these.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from kernelevolve.errors import KernelevolveError


class LLMError(KernelevolveError):
    """An LLM call that failed for good: retries exhausted, or a non-retryable reply (4xx)."""

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 0):
        self.status = status
        self.attempts = attempts
        super().__init__(message)

    def __reduce__(self):
        return (_rebuild_llm_error, (str(self), self.status, self.attempts))


def _rebuild_llm_error(message: str, status: int | None, attempts: int) -> LLMError:
    return LLMError(message, status=status, attempts=attempts)


@dataclass(frozen=True)
class Completion:
    """A successful reply. tokens/cost are None when the server or price table did not say."""

    text: str
    provider: str
    model: str
    tokens_in: int | None
    tokens_out: int | None
    latency_s: float
    cost_usd: float | None
    attempts: int
    finish_reason: str | None
    tool_calls: tuple = ()  # llm.tools.ToolCall, from converse(); () from complete()
    tools_mode: str | None = None  # converse(): "native" or "text" (the plain-text fallback)
    retries: tuple = ()  # why each earlier attempt was re-sent (CallRecord.retries)


@dataclass(frozen=True)
class CallRecord:
    """One `complete()` call as the store keeps it: what was asked, what came back, what it cost.

    `response` is None and `error` holds the one-line reason when the call failed. latency_s
    covers all attempts and the waits between them (not the wait for a concurrency slot).
    A converse() call (the agent's tool loop) also keeps the whole transcript it sent
    (`messages`, protocol-neutral: see llm/tools.py), the tool calls of the reply and the mode;
    `user` is then the transcript's first user message.

    `retries` has one entry per re-send, in order: {"attempt": the attempt that ended,
    "why": a short cause ("timeout after 600 s", "HTTP 529", "connection error", "re-sent
    without streaming"), "detail": the server's words, "at_s": seconds into the call}.
    `timeouts` counts the attempts that timed out (the last one included); `streamed` says
    whether the last attempt was streamed; `failure` is the short cause of a failed call
    ("timeout after 600 s", "HTTP 401"), beside `error`'s full sentence.
    """

    ts: float
    provider: str
    model: str
    system: str
    user: str
    response: str | None
    tokens_in: int | None
    tokens_out: int | None
    latency_s: float
    cost_usd: float | None
    attempts: int
    error: str | None
    messages: list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tools_mode: str | None = None
    retries: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    timeouts: int = 0
    streamed: bool | None = None
    failure: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
