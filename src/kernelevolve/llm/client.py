"""One async LLM client for both protocols: retries, a concurrency limit, costs, call records.

Why a wrapper over the official SDKs rather than raw HTTP: the SDKs track protocol changes
(headers, versions, response shapes) for us; we add what a long unattended search needs and the
SDKs do not give in one place: our retry policy (retry.py), per-model parameter quirks
(quirks.py), a semaphore so N parallel proposals cannot flood a rate limit, a cost per call
(prices.py), and a `CallRecord` for every call, successful or not, handed to `on_call` so the
run can store the prompt, the reply, the tokens and the cost.

Secrets: the API key is read from its environment variable once, when the client is created,
kept in a private attribute, and sent only in the request headers. It is never part of a
`Completion`, a `CallRecord`, an `LLMError` message or this client's repr; any echo of it in
text we pass on is replaced by "[redacted]". SDK exceptions (which hold the request, and so the
Authorization header) are not chained onto `LLMError`.
"""
from __future__ import annotations

import asyncio
import dataclasses
import importlib
import json
import random
import time
from dataclasses import dataclass
from typing import Any, Callable

from kernelevolve import knobs
from kernelevolve.errors import KernelevolveError
from kernelevolve.llm import quirks, tools
from kernelevolve.llm.prices import cost_usd
from kernelevolve.llm.retry import Failure, backoff_s, classify
from kernelevolve.llm.spec import LLMConfig

# Sent when a custom base_url is given and the default key variable is unset: local vLLM,
# Ollama and llama.cpp servers ignore the key, but both SDKs refuse to start without one.
PLACEHOLDER_KEY = "not-needed"

_REDACTED = "[redacted]"


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


@dataclass(frozen=True)
class CallRecord:
    """One `complete()` call as the store keeps it: what was asked, what came back, what it cost.

    `response` is None and `error` holds the one-line reason when the call failed. latency_s
    covers all attempts and the waits between them (not the wait for a concurrency slot).
    A converse() call (the agent's tool loop) also keeps the whole transcript it sent
    (`messages`, protocol-neutral: see llm/tools.py), the tool calls of the reply and the mode;
    `user` is then the transcript's first user message.
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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class _NoChoices(Exception):
    """A 200 reply without choices (seen from overloaded proxies); not retried."""


class _ToolsRejected(Exception):
    """A 400 about the `tools` we sent: converse() falls back to plain text."""


@dataclass(frozen=True)
class _Ask:
    """What one call sends, as its CallRecord keeps it."""

    system: str
    messages: list[dict[str, Any]]
    tools: list[Any] | None = None   # llm.tools.ToolSpec, sent natively
    mode: str | None = None          # converse(): "native" or "text"

    @property
    def user(self) -> str:
        return next((m["content"] for m in self.messages if m["role"] == "user"), "")


def _load_sdk(provider: str):
    try:
        return importlib.import_module(provider)
    except ImportError:
        raise LLMError(f"the {provider} SDK is not installed; "
                       "install it with: pip install 'kernelevolve[llm]'") from None


class LLMClient:
    """`await LLMClient(config).complete(system, user)` -> Completion, or LLMError.

    Safe to share between concurrent tasks of one event loop; at most config.max_concurrency
    requests are in flight (a slot is held through retry waits too, so a rate-limited client
    slows down instead of queueing more requests behind the limit). Used from a new event loop,
    it transparently makes a fresh SDK client and semaphore, since both bind to a loop.
    """

    def __init__(self, config: LLMConfig, on_call: Callable[[CallRecord], None] | None = None,
                 *, sleep: Callable[[float], Any] = asyncio.sleep,
                 rng: random.Random | None = None):
        self.config = config
        self.on_call = on_call
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._sdk = _load_sdk(config.provider)
        key = knobs.secret(config.key_env)
        self.placeholder_key = False
        if not key:
            if config.base_url and config.api_key_env is None:
                key, self.placeholder_key = PLACEHOLDER_KEY, True
            else:
                raise LLMError(f"no API key for {config.spec}: set ${config.key_env}"
                               + ("" if config.api_key_env else
                                  " (or name another variable with --llm-api-key-env)"))
        self._api_key = key
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Any = None
        self._sem: asyncio.Semaphore | None = None

    def __repr__(self) -> str:
        return f"LLMClient({self.config.spec!r}, base_url={self.config.base_url!r})"

    # -- plumbing -------------------------------------------------------------------------

    def _bind_loop(self) -> tuple[Any, asyncio.Semaphore]:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            cfg = self.config
            kwargs: dict[str, Any] = dict(api_key=self._api_key, max_retries=0,
                                          timeout=cfg.timeout_s)
            if cfg.base_url:
                kwargs["base_url"] = cfg.base_url
            factory = (self._sdk.AsyncOpenAI if cfg.provider == "openai"
                       else self._sdk.AsyncAnthropic)
            self._client = factory(**kwargs)
            self._sem = asyncio.Semaphore(cfg.max_concurrency)
            self._loop = loop
        return self._client, self._sem

    async def aclose(self) -> None:
        """Close the SDK client's connections. A client bound to another (finished) event loop
        is just dropped: its connections belong to that loop and cannot be closed from here."""
        client, loop = self._client, self._loop
        self._client, self._loop, self._sem = None, None, None
        if client is not None and loop is asyncio.get_running_loop():
            await client.close()

    async def __aenter__(self) -> "LLMClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def _scrub(self, text: str | None) -> str | None:
        """Replace any echo of the key (e.g. a proxy quoting the header back) in outgoing text."""
        if text and self._api_key and not self.placeholder_key and self._api_key in text:
            return text.replace(self._api_key, _REDACTED)
        return text

    async def _request(self, client: Any, ask: _Ask, params: dict):
        """One HTTP attempt -> (text, tool calls, tokens_in, tokens_out, finish_reason)."""
        cfg = self.config
        if cfg.provider == "anthropic":
            resp = await client.messages.create(
                model=cfg.model, **tools.anthropic_kwargs(ask.system, ask.messages, ask.tools),
                **params)
            return tools.parse_anthropic(resp)
        resp = await client.chat.completions.create(
            model=cfg.model, **tools.openai_kwargs(ask.system, ask.messages, ask.tools), **params)
        if not resp.choices:
            raise _NoChoices()
        return tools.parse_openai(resp)

    # -- the calls ------------------------------------------------------------------------

    async def complete(self, system: str, user: str) -> Completion:
        """Send one system + user prompt; return the reply, retrying transient failures."""
        return await self._call(_Ask(system, [{"role": "user", "content": user}]))

    async def converse(self, system: str, messages: list[dict[str, Any]],
                       tool_specs: list[Any], turn: int = 0) -> Completion:
        """One turn of a tool conversation (transcript format: llm/tools.py).

        Native tool calling first; a server that rejects `tools` with a 400 is remembered
        (quirk NO_TOOLS) and spoken to in plain text from then on, where the tools are described
        in the system prompt and the reply's ```tool blocks become its tool calls.
        """
        cfg = self.config
        if tool_specs and tools.NO_TOOLS not in quirks.learned(cfg.provider, cfg.model,
                                                               cfg.base_url):
            try:
                return await self._call(_Ask(system, messages, list(tool_specs), "native"))
            except _ToolsRejected:
                quirks.learn(cfg.provider, cfg.model, tools.NO_TOOLS, base_url=cfg.base_url)
        text_system, text_messages = tools.as_text(system, messages, list(tool_specs))
        return await self._call(_Ask(text_system, text_messages, None, "text"),
                                record=_Ask(text_system, messages, None, "text"),
                                text_calls_turn=turn)

    async def _call(self, ask: _Ask, record: _Ask | None = None,
                    text_calls_turn: int | None = None) -> Completion:
        """The one request path: semaphore, retries, quirks, scrubbing, the call record.

        `record` is what the CallRecord keeps when it differs from what is sent (the neutral
        transcript of a plain-text tool conversation); `text_calls_turn` set: read tool calls
        out of the reply's ```tool blocks.
        """
        cfg = self.config
        record = record or ask
        client, sem = self._bind_loop()
        async with sem:
            ts, start = time.time(), time.monotonic()
            attempts, retries = 0, 0
            while True:
                attempts += 1
                params = quirks.request_params(cfg.provider, cfg.model, cfg.temperature,
                                               cfg.max_output_tokens, base_url=cfg.base_url)
                try:
                    reply, failure = await self._attempt(client, ask, params)
                except Exception as exc:
                    self._record(ts, start, record, None, attempts, repr(exc))
                    raise
                if failure is None:
                    text, calls, t_in, t_out, finish = reply
                    break
                quirk = quirks.quirk_from_rejection(failure.status, failure.message, params)
                if quirk is not None:
                    # Fix the request and resend at once; quirks.learn makes later calls for this
                    # model skip the bad parameter from the start. Each quirk applies once, so
                    # this cannot loop.
                    quirks.learn(cfg.provider, cfg.model, quirk, base_url=cfg.base_url)
                    continue
                if ask.tools and tools.rejects_tools(failure.status, failure.message):
                    self._record(ts, start, record, None, attempts, self._error_message(
                        failure, attempts) + "; continuing without native tool calling")
                    raise _ToolsRejected()
                if failure.retryable and retries < cfg.max_retries:
                    retries += 1
                    await self._sleep(backoff_s(retries, cfg.retry_base_s, cfg.retry_cap_s,
                                                failure.retry_after_s, self._rng))
                    continue
                error = self._error_message(failure, attempts)
                self._record(ts, start, record, None, attempts, error)
                raise LLMError(error, status=failure.status, attempts=attempts)
            latency = time.monotonic() - start
        text = self._scrub(text) or ""
        if text_calls_turn is not None:
            calls = tools.parse_text_calls(text, text_calls_turn)
        cost = cost_usd(cfg.provider, cfg.model, t_in, t_out)
        self._record(ts, start, record, text, attempts, None, t_in, t_out, cost, latency, calls)
        return Completion(text=text, provider=cfg.provider, model=cfg.model, tokens_in=t_in,
                          tokens_out=t_out, latency_s=latency, cost_usd=cost, attempts=attempts,
                          finish_reason=finish, tool_calls=tuple(calls), tools_mode=record.mode)

    async def _attempt(self, client, ask: _Ask, params: dict) -> tuple[Any, Failure | None]:
        """One request: (its reply, None) or (None, the Failure that ended it); an error no
        classifier knows is raised."""
        timeout_s = self.config.timeout_s
        try:
            # httpx's timeout bounds each read, not the whole reply; this bounds both.
            return await asyncio.wait_for(self._request(client, ask, params),
                                          timeout_s + 1.0), None
        except asyncio.TimeoutError:
            return None, Failure("timeout", None, f"no reply within {timeout_s:g} s")
        except _NoChoices:
            return None, Failure("protocol", None, "reply had no choices")
        except Exception as exc:
            failure = classify(exc, self._sdk)
            if failure is None:
                raise
            return None, failure

    def _error_message(self, failure: Failure, attempts: int) -> str:
        cfg = self.config
        head = f"LLM call to {cfg.spec} failed"
        if failure.status in (401, 403):
            hint = f"check the API key in ${cfg.key_env}"
            if self.placeholder_key:
                hint += " (it is not set, so a placeholder was sent)"
            what = "authentication failed" if failure.status == 401 else "permission denied"
            return self._scrub(f"{head}: HTTP {failure.status} {what}; {hint}")
        if failure.status == 404:
            return self._scrub(f"{head}: HTTP 404 {failure.message or 'not found'}; check the "
                               "model name and the base URL")
        if failure.retryable:
            tries = f"{attempts} attempt" + ("s" if attempts != 1 else "")
            return self._scrub(f"{head} after {tries}: {failure.describe()}")
        return self._scrub(f"{head}: {failure.describe()}")

    def _record(self, ts: float, start: float, ask: _Ask, response: str | None,
                attempts: int, error: str | None, tokens_in: int | None = None,
                tokens_out: int | None = None, cost: float | None = None,
                latency: float | None = None, calls: tuple = ()) -> None:
        if self.on_call is None:
            return
        cfg = self.config
        conversation = ask.mode is not None
        self.on_call(CallRecord(
            ts=ts, provider=cfg.provider, model=cfg.model, system=self._scrub(ask.system) or "",
            user=self._scrub(ask.user) or "", response=self._scrub(response),
            tokens_in=tokens_in, tokens_out=tokens_out,
            latency_s=time.monotonic() - start if latency is None else latency,
            cost_usd=cost, attempts=attempts, error=self._scrub(error),
            messages=self._scrub_data(ask.messages) if conversation else None,
            tool_calls=self._scrub_data([c.to_dict() for c in calls]) if conversation else None,
            tools_mode=ask.mode))

    def _scrub_data(self, data: Any) -> Any:
        """_scrub over JSON-able data (a transcript, tool arguments)."""
        return json.loads(self._scrub(json.dumps(data)) or "null")

