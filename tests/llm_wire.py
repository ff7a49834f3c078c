"""The wire shapes tests/llm_servers.py answers with, per protocol: a success body, an error
body, and a success body cut into server-sent events for a streaming request.

Streams: OpenAI sends `chat.completion.chunk`s (role, content pieces, tool-call pieces, the
finish reason, a usage chunk when asked for) and `data: [DONE]`; Anthropic `message_start`
(input tokens), content blocks with `text_delta` / `input_json_delta` pieces, `message_delta`
(stop reason, output tokens) and `message_stop`.
"""
from __future__ import annotations

import json
import time
from typing import Any

__all__ = ["error_body", "pieces", "prompt_of", "sse_events", "success_body", "text_of"]

# Default error bodies, in each protocol's shape, by status.
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
                500: "api_error", 503: "api_error", 529: "overloaded_error"}


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks [{"type": "text", "text": ...}]
        return "\n".join(b.get("text", "") if b.get("type") != "tool_result"
                         else text_of(b.get("content")) for b in content if isinstance(b, dict))
    return ""


def prompt_of(request_json: Any) -> str:
    """All prompt text of an OpenAI or Anthropic request body: system first, then messages."""
    if not isinstance(request_json, dict):
        return ""
    parts = [text_of(request_json.get("system", ""))]
    parts += [text_of(m.get("content")) for m in request_json.get("messages", [])
              if isinstance(m, dict)]
    return "\n".join(p for p in parts if p)


def approx_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def success_body(protocol: str, reply: Any, request_json: dict, rid: int) -> dict:
    model = request_json.get("model", "unknown")
    t_in = reply.tokens_in if reply.tokens_in is not None else approx_tokens(
        prompt_of(request_json))
    t_out = reply.tokens_out if reply.tokens_out is not None else approx_tokens(reply.text)
    calls = reply.tool_calls
    if protocol == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if calls:
            message["content"] = reply.text or None
            message["tool_calls"] = [
                {"id": c.get("id") or f"call_{rid}_{i}", "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
                for i, c in enumerate(calls)]
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        return {"id": f"chatcmpl-{rid}", "object": "chat.completion", "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "finish_reason": finish, "message": message}],
                "usage": {"prompt_tokens": t_in, "completion_tokens": t_out,
                          "total_tokens": t_in + t_out}}
    content = [{"type": "text", "text": reply.text}] if reply.text or not calls else []
    content += [{"type": "tool_use", "id": c.get("id") or f"toolu_{rid}_{i}", "name": c["name"],
                 "input": c.get("arguments", {})} for i, c in enumerate(calls)]
    return {"id": f"msg_{rid:08d}", "type": "message", "role": "assistant", "model": model,
            "content": content,
            "stop_reason": reply.finish_reason or ("tool_use" if calls else "end_turn"),
            "stop_sequence": None, "usage": {"input_tokens": t_in, "output_tokens": t_out}}


def error_body(protocol: str, status: int) -> dict:
    kind = _ERROR_TYPES.get(status, "api_error")
    message = f"scripted {status}"
    if protocol == "openai":
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return {"type": "error", "error": {"type": kind, "message": message}}


def pieces(text: str, n: int) -> list[str]:
    """`text` cut into n nearly equal pieces (the empty string gives one empty piece)."""
    n = max(1, n)
    size = -(-len(text) // n) if text else 0
    return [text[i * size:(i + 1) * size] for i in range(n)] if size else [text]


def sse_events(protocol: str, whole: dict, chunks: int, include_usage: bool):
    """A whole success body (`whole`, in the protocol's shape) as server-sent events: yields
    (event name or None, data) in order; text and tool arguments come in `chunks` pieces."""
    if protocol == "openai":
        head = {k: whole[k] for k in ("id", "created", "model")}
        head["object"] = "chat.completion.chunk"

        def chunk(delta: dict, finish: str | None = None) -> dict:
            return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        message = whole["choices"][0]["message"]
        yield None, chunk({"role": "assistant", "content": ""})
        for piece in pieces(message.get("content") or "", chunks):
            yield None, chunk({"content": piece})
        for i, call in enumerate(message.get("tool_calls") or []):
            yield None, chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                               "function": {"name": call["function"]["name"],
                                                            "arguments": ""}}]})
            for piece in pieces(call["function"]["arguments"], chunks):
                yield None, chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
        yield None, chunk({}, whole["choices"][0]["finish_reason"])
        if include_usage:
            yield None, {**head, "choices": [], "usage": whole["usage"]}
        yield None, "[DONE]"
        return
    usage = whole["usage"]
    start = {**whole, "content": [], "stop_reason": None,
             "usage": {"input_tokens": usage["input_tokens"], "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(whole["content"]):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "text", "text": ""}}
            for piece in pieces(block["text"], chunks):
                yield "content_block_delta", {"type": "content_block_delta", "index": i,
                                              "delta": {"type": "text_delta", "text": piece}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {**block, "input": {}}}
            for piece in pieces(json.dumps(block["input"]), chunks):
                yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": piece}}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta",
                            "delta": {"stop_reason": whole["stop_reason"], "stop_sequence": None},
                            "usage": {"output_tokens": usage["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}
