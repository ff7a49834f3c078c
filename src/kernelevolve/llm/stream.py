"""Streamed replies in both protocols, read with an idle timeout and an overall cap.

Why stream: a capable model on a loaded server can take many minutes to answer a long prompt.
Without streaming the client sees nothing until the whole answer is ready, so its only guard is
a whole-request timeout, which either cuts off a slow but working server (and the answer is
thrown away) or waits for a dead one as long as the slowest answer may take. With streaming the
server sends the answer as it writes it, so "nothing received for `idle_s`" tells a stalled
server from a slow one: a server that keeps sending is never cut off; `deadline` is only a cap
on one attempt's total time (a server trickling forever).

On any way out (an answer, a timeout, an error, a cancellation) the response is closed before
returning, so the connection is gone before the client may send the request again: never two
attempts of one call in flight.

Token usage: OpenAI sends it in a last chunk when asked (`stream_options.include_usage`);
Anthropic in `message_start` (input) and `message_delta` (output).
"""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from kernelevolve.llm import tools


class IdleTimeout(Exception):
    """Nothing arrived for idle_s (the server stalled, or never answered)."""


class CapReached(Exception):
    """The attempt ran past its overall cap (`max_call_s`) while the reply was still coming."""


class NoChoices(Exception):
    """A 200 reply without choices (seen from overloaded proxies); not retried."""


async def within(awaitable: Any, idle_s: float, deadline: float) -> Any:
    """Await with the idle timeout, or less when the cap comes first."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise CapReached()
    try:
        return await asyncio.wait_for(awaitable, min(idle_s, left))
    except asyncio.TimeoutError:
        raise (CapReached() if left <= idle_s else IdleTimeout()) from None


async def _events(stream: Any, idle_s: float, deadline: float):
    """The stream's items, each awaited within the idle timeout."""
    iterator = stream.__aiter__()
    while True:
        try:
            yield await within(iterator.__anext__(), idle_s, deadline)
        except StopAsyncIteration:
            return


async def request(client: Any, provider: str, model: str, kwargs: dict, params: dict,
                  idle_s: float, deadline: float) -> tuple:
    """One streamed attempt -> (text, tool calls, tokens_in, tokens_out, finish_reason)."""
    if provider == "anthropic":
        opening = client.messages.create(model=model, stream=True, **kwargs, **params)
    else:
        opening = client.chat.completions.create(
            model=model, stream=True, stream_options={"include_usage": True}, **kwargs, **params)
    stream = await within(opening, idle_s, deadline)
    try:
        if "json" in stream.response.headers.get("content-type", ""):
            # A server that ignores `stream` answers with the whole reply at once.
            return _whole(provider, json.loads(await within(stream.response.aread(), idle_s,
                                                            deadline)))
        events = _events(stream, idle_s, deadline)
        if provider == "anthropic":
            return await _read_anthropic(events)
        return await _read_openai(events)
    finally:
        await stream.close()


def _whole(provider: str, body: Any) -> tuple:
    """A whole (unstreamed) reply body, read with the SDK's own types."""
    if provider == "anthropic":
        from anthropic.types import Message

        return tools.parse_anthropic(Message.model_validate(body))
    from openai.types.chat import ChatCompletion

    if not isinstance(body, dict) or not body.get("choices"):
        raise NoChoices()
    return tools.parse_openai(ChatCompletion.model_validate(body))


async def _read_openai(events: Any) -> tuple:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    finish, usage, any_choice = None, None, False
    async for chunk in events:
        if getattr(chunk, "usage", None) is not None:
            usage = chunk.usage
        for choice in chunk.choices or []:
            any_choice = True
            delta = choice.delta
            if delta is not None and delta.content:
                text.append(delta.content)
            for call in (getattr(delta, "tool_calls", None) or []) if delta is not None else []:
                entry = calls.setdefault(call.index if call.index is not None else len(calls),
                                         {"id": None, "name": "", "arguments": []})
                entry["id"] = call.id or entry["id"]
                fn = call.function
                if fn is not None:
                    entry["name"] += fn.name or ""
                    entry["arguments"].append(fn.arguments or "")
            if choice.finish_reason:
                finish = choice.finish_reason
    if not any_choice:
        raise NoChoices()
    made = tuple(tools.call_from(entry["id"] or f"call_{i}", entry["name"],
                                 "".join(entry["arguments"]))
                 for i, entry in sorted(calls.items()))
    return ("".join(text), made, usage.prompt_tokens if usage else None,
            usage.completion_tokens if usage else None, finish)


async def _read_anthropic(events: Any) -> tuple:
    blocks: dict[int, dict[str, Any]] = {}
    tokens_in = tokens_out = None
    stop = None
    async for event in events:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            usage = event.message.usage
            tokens_in = tools.anthropic_input_tokens(usage)
            tokens_out = getattr(usage, "output_tokens", None)
        elif kind == "content_block_start":
            block = event.content_block
            blocks[event.index] = {"type": block.type, "text": [getattr(block, "text", "") or ""],
                                   "id": getattr(block, "id", None),
                                   "name": getattr(block, "name", "") or "", "json": []}
        elif kind == "content_block_delta":
            entry = blocks.setdefault(event.index, {"type": "text", "text": [], "json": [],
                                                    "id": None, "name": ""})
            delta = event.delta
            if delta.type == "text_delta":
                entry["text"].append(delta.text or "")
            elif delta.type == "input_json_delta":
                entry["json"].append(delta.partial_json or "")
        elif kind == "message_delta":
            stop = getattr(event.delta, "stop_reason", None) or stop
            usage = getattr(event, "usage", None)
            if usage is not None:
                tokens_out = getattr(usage, "output_tokens", None) or tokens_out
                if getattr(usage, "input_tokens", None):
                    tokens_in = tools.anthropic_input_tokens(usage)
    ordered = [blocks[i] for i in sorted(blocks)]
    text = "".join("".join(b["text"]) for b in ordered if b["type"] == "text")
    calls = tuple(tools.call_from(b["id"] or f"toolu_{i}", b["name"], "".join(b["json"]) or "{}")
                  for i, b in enumerate(ordered) if b["type"] == "tool_use")
    return text, calls, tokens_in, tokens_out, stop
