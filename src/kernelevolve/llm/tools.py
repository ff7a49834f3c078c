"""A conversation with tools, in both protocols: request bodies, replies, the plain-text fallback.

The agent loop (operators/agent.py) keeps one protocol-neutral transcript:

    {"role": "user", "content": str}
    {"role": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments"}]}
    {"role": "tool", "tool_call_id": str, "name": str, "content": str}

and this module turns it into each provider's native tool calling (OpenAI `tools` with
`tool_calls` and role "tool" replies; Anthropic `tools` with `tool_use` / `tool_result` content
blocks), and each reply back into (text, tool calls, tokens, finish reason). A plain
`complete(system, user)` is the one-user-message case of the same path, with no tools, so its
request is what it always was.

Fallback: servers without tool calling (many self-hosted ones) answer a request carrying
`tools` with a 400 that names them ("does not support tools", vLLM's "tool choice requires
--enable-auto-tool-choice"). The client then learns NO_TOOLS for that model and server
(llm/quirks.py's memory) and speaks plain text: the tools are described in the system prompt,
the model writes one fenced ```tool {"name": ..., "arguments": {...}}``` block, and results come
back as a user message.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

NO_TOOLS = "no_tools"  # a quirk (llm/quirks.py learn/learned): this server rejects `tools`

_TEXT_CALL = re.compile(r"```[ \t]*tool[ \t]*\n(.*?)```", re.S)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)  # JSON schema of the arguments


@dataclass(frozen=True)
class ToolCall:
    """One call the model asked for. `error` says why the arguments could not be read."""

    id: str
    name: str
    arguments: dict[str, Any]
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "name": self.name, "arguments": self.arguments}
        if self.error:
            out["error"] = self.error
        return out


def rejects_tools(status: int | None, message: str) -> bool:
    """A 400 that is about the `tools` we sent: the server has no (enabled) tool calling."""
    return status == 400 and "tool" in (message or "").lower()


def call_from(call_id: str, name: str, raw_arguments: Any) -> ToolCall:
    """A ToolCall from a reply's id, name and arguments (a JSON string or an object)."""
    args, error = _arguments(raw_arguments)
    return ToolCall(id=call_id, name=name or "", arguments=args, error=error)


def anthropic_input_tokens(usage: Any) -> int:
    """Input tokens of an Anthropic usage object, prompt-cache reads and writes included (we do
    not enable caching, so they are 0 or absent here)."""
    return ((getattr(usage, "input_tokens", 0) or 0)
            + (getattr(usage, "cache_creation_input_tokens", 0) or 0)
            + (getattr(usage, "cache_read_input_tokens", 0) or 0))


def _arguments(raw: Any) -> tuple[dict[str, Any], str | None]:
    if isinstance(raw, dict):
        return raw, None
    try:
        value = json.loads(raw or "{}")
    except (TypeError, ValueError) as exc:
        return {}, f"the arguments are not valid JSON ({exc})"
    if not isinstance(value, dict):
        return {}, "the arguments must be a JSON object"
    return value, None


# ---- OpenAI chat completions ----------------------------------------------------------------
def openai_kwargs(system: str, messages: list[dict], tools: list[ToolSpec] | None) -> dict:
    out: list[dict] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if m["role"] == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.get("content") or None}
            if m.get("tool_calls"):
                msg["tool_calls"] = [{"id": c["id"], "type": "function", "function": {
                    "name": c["name"], "arguments": json.dumps(c["arguments"])}}
                    for c in m["tool_calls"]]
            out.append(msg)
        elif m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"],
                        "content": m["content"]})
        else:
            out.append({"role": "user", "content": m["content"]})
    kwargs: dict[str, Any] = {"messages": out}
    if tools:
        kwargs["tools"] = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools]
    return kwargs


def parse_openai(resp: Any) -> tuple[str, tuple[ToolCall, ...], int | None, int | None, Any]:
    choice = resp.choices[0]
    calls = []
    for i, c in enumerate(getattr(choice.message, "tool_calls", None) or []):
        fn = getattr(c, "function", None)
        args, error = _arguments(getattr(fn, "arguments", None))
        calls.append(ToolCall(id=c.id or f"call_{i}", name=getattr(fn, "name", "") or "",
                              arguments=args, error=error))
    usage = resp.usage
    return (choice.message.content or "", tuple(calls),
            usage.prompt_tokens if usage else None, usage.completion_tokens if usage else None,
            choice.finish_reason)


# ---- Anthropic messages ---------------------------------------------------------------------
def anthropic_kwargs(system: str, messages: list[dict], tools: list[ToolSpec] | None) -> dict:
    out: list[dict] = []
    for m in messages:
        if m["role"] == "assistant":
            blocks: list[dict] = [{"type": "text", "text": m["content"]}] if m.get("content") \
                else []
            blocks += [{"type": "tool_use", "id": c["id"], "name": c["name"],
                        "input": c["arguments"]} for c in m.get("tool_calls") or []]
            out.append({"role": "assistant", "content": blocks})
            continue
        if m["role"] == "tool":
            block = {"type": "tool_result", "tool_use_id": m["tool_call_id"],
                     "content": m["content"]}
        else:
            block = {"type": "text", "text": m["content"]}
        if out and out[-1]["role"] == "user":  # the protocol alternates roles: merge
            prev = out[-1]
            if isinstance(prev["content"], str):
                prev["content"] = [{"type": "text", "text": prev["content"]}]
            prev["content"].append(block)
        elif m["role"] == "tool":
            out.append({"role": "user", "content": [block]})
        else:
            out.append({"role": "user", "content": m["content"]})  # plain, as complete() sends
    kwargs: dict[str, Any] = {"messages": out}
    if system:
        kwargs["system"] = system
    if tools:
        kwargs["tools"] = [{"name": t.name, "description": t.description,
                            "input_schema": t.parameters} for t in tools]
    return kwargs


def parse_anthropic(resp: Any) -> tuple[str, tuple[ToolCall, ...], int | None, int | None, Any]:
    blocks = resp.content or []
    text = "".join(getattr(b, "text", "") for b in blocks if getattr(b, "type", None) == "text")
    calls = []
    for b in blocks:
        if getattr(b, "type", None) == "tool_use":
            args, error = _arguments(getattr(b, "input", None))
            calls.append(ToolCall(id=b.id, name=b.name, arguments=args, error=error))
    usage = resp.usage
    tokens_in = tokens_out = None
    if usage is not None:
        tokens_in, tokens_out = anthropic_input_tokens(usage), usage.output_tokens
    return text, tuple(calls), tokens_in, tokens_out, resp.stop_reason


# ---- plain-text fallback --------------------------------------------------------------------
def text_instructions(tools: list[ToolSpec]) -> str:
    lines = ["## Calling tools (this server has no native tool calling)",
             "To call a tool, end your answer with exactly one fenced block like this, and wait "
             "for the result in the next message:",
             "```tool", '{"name": "compile", "arguments": {"source": "<the whole module>"}}',
             "```", "Arguments are JSON (escape newlines in strings as \\n). The tools:"]
    for t in tools:
        params = ", ".join(t.parameters.get("properties", {}))
        lines.append(f"- {t.name}({params}): {t.description}")
    return "\n".join(lines)


def as_text(system: str, messages: list[dict],
            tools: list[ToolSpec]) -> tuple[str, list[dict]]:
    """The transcript for a server without tool calling: tool results become user text."""
    out: list[dict] = []
    for m in messages:
        if m["role"] == "assistant":
            out.append({"role": "assistant", "content": m.get("content") or "(tool call)"})
            continue
        text = (f"Result of tool {m['name']}:\n{m['content']}" if m["role"] == "tool"
                else m["content"])
        if out and out[-1]["role"] == "user":
            out[-1] = {"role": "user", "content": out[-1]["content"] + "\n\n" + text}
        else:
            out.append({"role": "user", "content": text})
    system = (system + "\n\n" if system else "") + text_instructions(tools)
    return system, out


def parse_text_calls(text: str, turn: int = 0) -> tuple[ToolCall, ...]:
    """The ```tool blocks of a plain-text reply, as tool calls (ids made up: text-T-N)."""
    calls = []
    for i, body in enumerate(_TEXT_CALL.findall(text or "")):
        try:
            data = json.loads(body)
        except ValueError as exc:
            calls.append(ToolCall(f"text-{turn}-{i}", "", {}, f"the tool block is not valid "
                                                             f"JSON ({exc})"))
            continue
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            calls.append(ToolCall(f"text-{turn}-{i}", "", {},
                                  'the tool block needs {"name": ..., "arguments": {...}}'))
            continue
        args, error = _arguments(data.get("arguments") or {})
        calls.append(ToolCall(f"text-{turn}-{i}", data["name"], args, error))
    return tuple(calls)
