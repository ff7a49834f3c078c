"""When to retry an LLM call and how long to wait: pure functions, so they are tested alone.

Why our own loop instead of the SDKs' built-in retries (which we switch off with max_retries=0):
one policy for both providers, every attempt counted in the call record (a run's cost and
latency report should show that a call took 3 tries), a backoff base that tests can shrink to
milliseconds, and a cap on any single wait so a server asking for `Retry-After: 3600` cannot
stall a search for an hour.

Retried: 408, 409, 429 and every 5xx (Anthropic's 529 "overloaded" included), connection errors
and timeouts; the same set the SDKs themselves retry. Not retried: other 4xx (a bad key, an
unknown model or a rejected parameter will not fix itself by waiting).
"""
from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Any, Mapping

RETRYABLE_STATUS = frozenset({408, 409, 429})


@dataclass(frozen=True)
class Failure:
    """One failed attempt, classified. `message` is the server's own words, one line."""

    kind: str  # "status", "timeout", "cap" (max_call_s), "connection" or "protocol"
    status: int | None
    message: str
    retry_after_s: float | None = None
    after_s: float | None = None  # a timeout: the limit that ran out

    @property
    def retryable(self) -> bool:
        if self.kind in ("timeout", "connection"):
            return True
        if self.kind == "status" and self.status is not None:
            return self.status in RETRYABLE_STATUS or self.status >= 500
        return False  # "cap": the reply was still arriving; a re-send would only start over

    @property
    def label(self) -> str:
        """What ended the attempt, short and without the server's words, so that a run's
        retries can be counted by cause: "timeout after 600 s", "HTTP 529", "connection error"."""
        if self.kind == "status":
            return f"HTTP {self.status}"
        if self.kind in ("timeout", "cap") and self.after_s is not None:
            return f"{'timeout' if self.kind == 'timeout' else 'cap'} after {self.after_s:g} s"
        return f"{self.kind} error" if self.kind in ("connection", "protocol") else self.kind

    def describe(self) -> str:
        if self.kind == "status":
            return f"HTTP {self.status}" + (f": {self.message}" if self.message else "")
        return f"{self.kind}: {self.message}" if self.message else self.kind


def retry_after_s(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from `retry-after-ms` or `Retry-After`.

    Retry-After is either delta-seconds ("1", "0.5") or an HTTP date (RFC 9110 section 10.2.3);
    `retry-after-ms` is the millisecond form OpenAI and Anthropic also send. None when absent or
    unparseable; never negative (a date in the past means "now").
    """
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    raw_ms = lower.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = lower.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def backoff_s(attempt: int, base_s: float, cap_s: float, retry_after: float | None = None,
              rng: random.Random | None = None) -> float:
    """Wait before retry number `attempt` (1 = first retry), never more than cap_s.

    Without Retry-After: exponential with "equal jitter", base * 2**(attempt-1) halved plus a
    random half, so clients that failed together do not retry together yet each still waits at
    least half the nominal delay. With Retry-After: the server knows best; wait that long plus
    up to 10% jitter (never earlier, which would just earn another 429).
    """
    rng = rng or random
    if retry_after is not None:
        wait = retry_after * (1.0 + rng.uniform(0.0, 0.1))
    else:
        nominal = min(cap_s, base_s * (2 ** max(0, attempt - 1)))
        wait = nominal / 2 + rng.uniform(0.0, nominal / 2)
    return min(cap_s, wait)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def server_message(body: Any, fallback: str = "") -> str:
    """The human-readable message in an error body, in either provider's shape.

    OpenAI: {"error": {"message": ...}} (the SDK often hands us the inner object already);
    Anthropic: {"type": "error", "error": {"type": ..., "message": ...}}; vLLM/others: {"message"}
    or {"detail"}.
    """
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict):
            for key in ("message", "detail"):
                if inner.get(key):
                    return _one_line(inner[key])
        elif isinstance(inner, str) and inner:
            return _one_line(inner)
        for key in ("message", "detail"):
            if body.get(key):
                return _one_line(body[key])
    elif isinstance(body, str) and body.strip():
        return _one_line(body)
    return _one_line(fallback)


# An error event in the middle of a streamed reply (Anthropic sends `event: error` after a 200,
# e.g. "overloaded_error" when the server is overloaded mid-answer) by the status it stands for.
_STREAM_ERRORS = {"overloaded_error": 529, "api_error": 500, "rate_limit_error": 429,
                  "timeout_error": 504, "request_too_large": 413}


def _error_type(body: Any) -> str | None:
    inner = body.get("error", body) if isinstance(body, dict) else None
    return inner.get("type") if isinstance(inner, dict) else None


def classify(exc: BaseException, sdk: Any) -> Failure | None:
    """Turn an SDK exception into a Failure; None when it is not an API error (a bug: re-raise).

    `sdk` is the `openai` or `anthropic` module; both define the same exception names.
    """
    if isinstance(exc, sdk.APITimeoutError):
        return Failure("timeout", None, "no reply within the timeout")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        return Failure("connection", None, _one_line(f"{exc} {cause or ''}".strip()))
    if isinstance(exc, sdk.APIStatusError):
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        body = getattr(exc, "body", None)
        status = exc.status_code
        if status == 200:  # an error event inside a streamed reply: its type says which
            status = _STREAM_ERRORS.get(_error_type(body))
            if status is None:
                return Failure("protocol", None, server_message(body, "error in the stream"))
        return Failure("status", status, server_message(body, getattr(exc, "message", "")),
                       retry_after_s(headers))
    if isinstance(exc, sdk.APIError):  # e.g. a 200 whose JSON does not match the schema
        return Failure("protocol", None, _one_line(getattr(exc, "message", str(exc))))
    return None
