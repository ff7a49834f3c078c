"""One async LLM client for both protocols: retries, a concurrency limit, costs, call records.

Why a wrapper over the official SDKs rather than raw HTTP: the SDKs track protocol changes
(headers, versions, response shapes) for us; we add what a long unattended search needs and the
SDKs do not give in one place: our retry policy (retry.py), per-model parameter quirks
(quirks.py), a semaphore so N parallel proposals cannot flood a rate limit, a cost per call
(prices.py), and a `CallRecord` for every call, successful or not, handed to `on_call` so the
run can store the prompt, the reply, the tokens and the cost.

Every attempt is accounted for: replies are streamed (llm/stream.py), so the timeout is an idle
timeout a slow but working server never hits; a retry is sent only after the previous attempt's
connection is closed (never two attempts of one call in flight); and the record says how many
attempts a call took, how many timed out, and why each re-send happened (`retries`), so a run
summary can say "2 retried (1 timeout after 600 s, 1 HTTP 529)" instead of silence.

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
from kernelevolve.llm import quirks, stream, tools
from kernelevolve.llm.prices import cost_usd
from kernelevolve.llm.records import CallRecord, Completion, LLMError
from kernelevolve.llm.retry import Failure, backoff_s, classify
from kernelevolve.llm.spec import LLMConfig

# Sent when a custom base_url is given and the default key variable is unset: local vLLM,
# Ollama and llama.cpp servers ignore the key, but both SDKs refuse to start without one.
PLACEHOLDER_KEY = "not-needed"

_REDACTED = "[redacted]"


# What a quirk-driven re-send is called in a call's `retries`.
_RESENT = {quirks.NO_TEMPERATURE: "re-sent without temperature",
           quirks.MAX_COMPLETION_TOKENS: "re-sent with max_completion_tokens",
           quirks.NO_STREAM: "re-sent without streaming"}


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
            # The SDK's own (per-read) timeout is a backstop a little past ours (stream.py).
            kwargs: dict[str, Any] = dict(api_key=self._api_key, max_retries=0,
                                          timeout=cfg.timeout_s + 5.0)
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

    async def _request(self, client: Any, ask: _Ask, params: dict, streamed: bool):
        """One HTTP attempt -> (text, tool calls, tokens_in, tokens_out, finish_reason)."""
        cfg = self.config
        kwargs = (tools.anthropic_kwargs if cfg.provider == "anthropic" else tools.openai_kwargs)(
            ask.system, ask.messages, ask.tools)
        deadline = time.monotonic() + cfg.max_call_s
        if streamed:
            return await stream.request(client, cfg.provider, cfg.model, kwargs, params,
                                        cfg.timeout_s, deadline)
        # A server that cannot stream: the idle timeout bounds the wait for the whole reply.
        if cfg.provider == "anthropic":
            opening = client.messages.create(model=cfg.model, **kwargs, **params)
        else:
            opening = client.chat.completions.create(model=cfg.model, **kwargs, **params)
        resp = await stream.within(opening, cfg.timeout_s, deadline)
        if cfg.provider == "anthropic":
            return tools.parse_anthropic(resp)
        if not resp.choices:
            raise stream.NoChoices()
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
            log = _Log(time.time(), time.monotonic())
            retries = 0
            while True:
                log.attempts += 1
                params = quirks.request_params(cfg.provider, cfg.model, cfg.temperature,
                                               cfg.max_output_tokens, base_url=cfg.base_url)
                log.streamed = quirks.NO_STREAM not in quirks.learned(cfg.provider, cfg.model,
                                                                      cfg.base_url)
                try:
                    reply, failure = await self._attempt(client, ask, params, log.streamed)
                except Exception as exc:
                    self._record(log, record, None, repr(exc), cause="client error")
                    raise
                if failure is None:
                    break
                log.timeouts += failure.kind in ("timeout", "cap")
                quirk = quirks.quirk_from_rejection(failure.status, failure.message, params)
                if quirk is None and log.streamed and quirks.rejects_stream(failure.status,
                                                                            failure.message):
                    quirk = quirks.NO_STREAM
                if quirk is not None:
                    # Fix the request and resend at once; quirks.learn makes later calls for this
                    # model skip the bad parameter from the start. Each quirk applies once, so
                    # this cannot loop.
                    quirks.learn(cfg.provider, cfg.model, quirk, base_url=cfg.base_url)
                    log.retry(_RESENT[quirk], self._scrub(failure.describe()))
                    continue
                if ask.tools and tools.rejects_tools(failure.status, failure.message):
                    self._record(log, record, None, self._error_message(
                        failure, log.attempts) + "; continuing without native tool calling",
                        cause=failure.label)
                    raise _ToolsRejected()
                if failure.retryable and retries < cfg.max_retries:
                    retries += 1
                    log.retry(failure.label, self._scrub(failure.describe()))
                    await self._sleep(backoff_s(retries, cfg.retry_base_s, cfg.retry_cap_s,
                                                failure.retry_after_s, self._rng))
                    continue
                error = self._error_message(failure, log.attempts)
                self._record(log, record, None, error, cause=failure.label)
                raise LLMError(error, status=failure.status, attempts=log.attempts)
        return self._answer(log, record, reply, time.monotonic() - log.start, text_calls_turn)

    def _answer(self, log: "_Log", record: _Ask, reply: tuple, latency: float,
                text_calls_turn: int | None) -> Completion:
        """The Completion (and the CallRecord) of a call that got its answer."""
        cfg = self.config
        text, calls, t_in, t_out, finish = reply
        text = self._scrub(text) or ""
        if text_calls_turn is not None:
            calls = tools.parse_text_calls(text, text_calls_turn)
        cost = cost_usd(cfg.provider, cfg.model, t_in, t_out)
        self._record(log, record, text, None, t_in, t_out, cost, latency, calls)
        return Completion(text=text, provider=cfg.provider, model=cfg.model, tokens_in=t_in,
                          tokens_out=t_out, latency_s=latency, cost_usd=cost,
                          attempts=log.attempts, finish_reason=finish, tool_calls=tuple(calls),
                          tools_mode=record.mode, retries=tuple(log.retries))

    async def _attempt(self, client, ask: _Ask, params: dict,
                       streamed: bool) -> tuple[Any, Failure | None]:
        """One request: (its reply, None) or (None, the Failure that ended it); an error no
        classifier knows is raised. Its connection is closed before this returns."""
        cfg = self.config
        try:
            return await self._request(client, ask, params, streamed), None
        except stream.IdleTimeout:
            what = "nothing received" if streamed else "no reply"
            return None, Failure("timeout", None, f"{what} for {cfg.timeout_s:g} s",
                                 after_s=cfg.timeout_s)
        except stream.CapReached:
            return None, Failure("cap", None, f"the reply was still arriving after "
                                 f"{cfg.max_call_s:g} s (max_call_s); not re-sent",
                                 after_s=cfg.max_call_s)
        except stream.NoChoices:
            return None, Failure("protocol", None, "reply had no choices")
        except Exception as exc:
            failure = classify(exc, self._sdk)
            if failure is None:
                raise
            if failure.kind == "timeout":  # the SDK's backstop fired first
                failure = dataclasses.replace(failure, after_s=cfg.timeout_s)
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

    def _record(self, log: "_Log", ask: _Ask, response: str | None, error: str | None,
                tokens_in: int | None = None, tokens_out: int | None = None,
                cost: float | None = None, latency: float | None = None,
                calls: tuple = (), cause: str | None = None) -> None:
        if self.on_call is None:
            return
        cfg = self.config
        conversation = ask.mode is not None
        self.on_call(CallRecord(
            ts=log.ts, provider=cfg.provider, model=cfg.model,
            system=self._scrub(ask.system) or "", user=self._scrub(ask.user) or "",
            response=self._scrub(response), tokens_in=tokens_in, tokens_out=tokens_out,
            latency_s=time.monotonic() - log.start if latency is None else latency,
            cost_usd=cost, attempts=log.attempts, error=self._scrub(error),
            messages=self._scrub_data(ask.messages) if conversation else None,
            tool_calls=self._scrub_data([c.to_dict() for c in calls]) if conversation else None,
            tools_mode=ask.mode, retries=list(log.retries), timeouts=log.timeouts,
            streamed=log.streamed, failure=cause))

    def _scrub_data(self, data: Any) -> Any:
        """_scrub over JSON-able data (a transcript, tool arguments)."""
        return json.loads(self._scrub(json.dumps(data)) or "null")



@dataclass
class _Log:
    """One call's attempts as they happen: what its CallRecord will say about them."""

    ts: float
    start: float
    attempts: int = 0
    timeouts: int = 0
    streamed: bool | None = None
    retries: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def retry(self, why: str, detail: str | None) -> None:
        self.retries.append({"attempt": self.attempts, "why": why, "detail": detail or "",
                             "at_s": round(time.monotonic() - self.start, 3)})
