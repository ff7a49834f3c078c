"""Local fake LLM servers for tests: real OpenAI and Anthropic wire protocols, scripted replies.

Why a real HTTP server rather than mocking the SDK: the code under test then runs exactly as in
production, official SDK, headers, JSON parsing, timeouts and all, and the test can assert on what
actually went over the wire (the prompt, the API key header, the sampling parameters).

Usage
-----
    from llm_servers import Reply, ScriptedServer, prompt_of

    with ScriptedServer([Reply(status=429, headers={"Retry-After": "1"}),
                         Reply(text="```python\\nclass ModelNew: ...\\n```")]) as server:
        cfg = LLMConfig("openai", "gpt-4o", base_url=server.openai_base_url,
                        api_key_env="KE_TEST_OPENAI_KEY")
        ...                                       # or for the CLI:
        # --llm openai:gpt-4o --llm-base-url {server.openai_base_url}
        # --llm anthropic:claude-sonnet-4-5 --llm-base-url {server.anthropic_base_url}
        assert server.requests[-1].json["model"] == "gpt-4o"
        assert "def forward" in server.requests[-1].prompt

Base URLs: the openai SDK appends "/chat/completions" to its base_url, whose default is
"https://api.openai.com/v1", so pass `server.openai_base_url` ("http://127.0.0.1:PORT/v1"). The
anthropic SDK appends "/v1/messages" to a base_url whose default is "https://api.anthropic.com",
so pass `server.anthropic_base_url` ("http://127.0.0.1:PORT"). `server.base_url_for(provider)`
picks the right one. The server routes on the path's ending (".../chat/completions" or
".../messages"), so a doubled "/v1" still works, but the requests record the path as sent.

Script: a list of `Reply` (or plain strings, meaning `Reply(text=...)`), consumed in order, one
per request; when it runs out, the LAST item repeats (so `[Reply(status=500)]` always fails and
`[Reply(status=429), Reply(text="ok")]` fails once, then always answers "ok"). No script at all
answers `Reply()` ("ok") forever. `server.push(...)` appends to the script mid-test. Or pass
`handler=fn`: fn(request_json: dict) -> Reply | str is called for every request instead (use
`prompt_of(request_json)` to see the prompt text), e.g. to answer depending on the prompt.

Tool calling: `Reply(tool_calls=[{"name": "compile", "arguments": {"source": ...}}])` answers
with native tool calls in the request's protocol (OpenAI `message.tool_calls`, finish_reason
"tool_calls"; Anthropic `tool_use` content blocks, stop_reason "tool_use"); `text` may go with
them. Ids are made up ("call_N" / "toolu_N") unless an item gives "id". What the client sent back
is on the request: `request.tool_results` ([(tool call id, result text)], either protocol) and
`request.tools` (the names of the tools offered). `ScriptedServer(..., reject_tools=True)`
answers every request that carries `tools` with a protocol-shaped 400 ("tools are not supported
by this server", as servers without tool calling do) without consuming the script.

Streaming: a request with `"stream": true` is answered with server-sent events in its
protocol (OpenAI `chat.completion.chunk`s ending in `data: [DONE]`, with a usage chunk when
`stream_options.include_usage` asks for one; Anthropic `message_start` ... `message_stop`). The
reply's text (and tool-call arguments) is cut into `Reply.chunks` pieces, and the events are
sent `chunk_delay_s` apart, so a test can make an answer that keeps arriving for seconds. An error status is answered
as plain JSON, before any event, as real servers do; `body` with status 200 is sent as one event.
`Reply(stream_error="overloaded_error")` breaks off after two events with an error event of
that type (Anthropic `event: error`; OpenAI a `data: {"error": ...}` chunk).
`ScriptedServer(..., reject_stream=True)` answers every streaming request with a 400 ("stream is
not supported by this server") without consuming the script; `ignore_stream=True` answers it
with the whole JSON reply, as servers that ignore `stream` do.

The server runs in a daemon thread, binds 127.0.0.1 on a free port, and never touches the
network. Delayed replies (`Reply(delay_s=...)`) are cut short when the server closes, so a
timeout test does not hold up teardown, and when the client closes the connection: such a
request is `abandoned` and no longer counts as in flight. `max_in_flight` is exact even for a
client that re-sends at once: when a request arrives, any earlier one whose client has already
hung up is retired first.
"""
from __future__ import annotations

import itertools
import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Union

from llm_wire import text_of, error_body, prompt_of, sse_events, success_body

__all__ = ["Reply", "RecordedRequest", "ScriptedServer", "prompt_of"]

@dataclass
class Reply:
    """One scripted answer.

    status 200 builds a protocol-correct success body from `text`, `finish_reason` and the token
    counts (default: about one token per 4 characters of prompt / reply, at least 1). Any other
    status sends `body` (default: a protocol-shaped error JSON saying "scripted <status>").
    `body` given with status 200 replaces the whole success JSON (for malformed-reply tests).
    `headers` are added to the response (e.g. {"Retry-After": "1"}). `delay_s` waits before
    answering (to provoke a client timeout or to measure concurrency).
    """

    text: str = "ok"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay_s: float = 0.0
    finish_reason: str | None = None  # default: "stop" (OpenAI) / "end_turn" (Anthropic)
    tokens_in: int | None = None
    tokens_out: int | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  # {"name", "arguments"[, "id"]}
    chunks: int = 1            # streaming only: pieces the text is sent in
    chunk_delay_s: float = 0.0  # streaming only: wait before each piece
    stream_error: str | None = None  # streaming only: an error event of this type mid-answer


@dataclass
class RecordedRequest:
    """One request as it arrived. `headers` keys are lower-case; `json` is the parsed body."""

    path: str
    headers: dict[str, str]
    json: Any
    protocol: str  # "openai" or "anthropic"
    arrived: float  # time.monotonic()
    finished: float | None = None  # when the reply was sent (or abandoned)
    abandoned: bool = False  # the client hung up before the whole reply was sent
    _sock: Any = field(default=None, repr=False, compare=False)

    @property
    def streamed(self) -> bool:
        """The client asked for a streamed reply."""
        return isinstance(self.json, dict) and bool(self.json.get("stream"))

    @property
    def prompt(self) -> str:
        """System and user text of the request, joined (for `"..." in request.prompt`)."""
        return prompt_of(self.json)

    @property
    def tools(self) -> list[str]:
        """Names of the tools the request offered (either protocol)."""
        body = self.json if isinstance(self.json, dict) else {}
        return [t.get("name") or t.get("function", {}).get("name") for t in body.get("tools", [])]

    @property
    def tool_results(self) -> list[tuple[str, str]]:
        """(tool call id, result text) for every tool result the request sends back: OpenAI
        role "tool" messages, Anthropic `tool_result` blocks."""
        out = []
        body = self.json if isinstance(self.json, dict) else {}
        for m in body.get("messages", []):
            if m.get("role") == "tool":
                out.append((m.get("tool_call_id"), text_of(m.get("content"))))
            elif isinstance(m.get("content"), list):
                out += [(b.get("tool_use_id"), text_of(b.get("content")))
                        for b in m["content"] if b.get("type") == "tool_result"]
        return out


Script = Iterable[Union[Reply, str]]
Handler = Callable[[Any], Union[Reply, str]]


class ScriptedServer:
    """A local server speaking POST /v1/chat/completions and POST /v1/messages. See module doc.

    Attributes for assertions: `requests` (list of RecordedRequest, in arrival order),
    `max_in_flight` (the most requests the server was handling at the same moment).
    """

    def __init__(self, script: Script | None = None, *, handler: Handler | None = None,
                 reject_tools: bool = False, reject_stream: bool = False,
                 ignore_stream: bool = False):
        if script is not None and handler is not None:
            raise ValueError("give a script or a handler, not both")
        self._script = [Reply(text=r) if isinstance(r, str) else r for r in (script or [])]
        self._handler = handler
        self.reject_tools = reject_tools
        self.reject_stream = reject_stream
        self.ignore_stream = ignore_stream
        self._last: Reply = Reply()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._ids = itertools.count(1)
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> "ScriptedServer":
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(self))
        self._httpd.daemon_threads = True  # a delayed reply must not block close()
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "ScriptedServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- addresses ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT (no path)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """For openai.AsyncOpenAI(base_url=...) and --llm-base-url with openai:MODEL."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For anthropic.AsyncAnthropic(base_url=...) and --llm-base-url with anthropic:MODEL."""
        return self.url

    def base_url_for(self, provider: str) -> str:
        return {"openai": self.openai_base_url, "anthropic": self.anthropic_base_url}[provider]

    # -- script ---------------------------------------------------------------------------

    def push(self, *replies: Reply | str) -> None:
        """Append replies to the script (they come after anything not yet consumed)."""
        with self._lock:
            self._script += [Reply(text=r) if isinstance(r, str) else r for r in replies]

    def _next_reply(self, request_json: Any) -> Reply:
        if self._handler is not None:
            reply = self._handler(request_json)
            return Reply(text=reply) if isinstance(reply, str) else reply
        with self._lock:
            if self._script:
                self._last = self._script.pop(0)
            return self._last

    def _enter(self, request: RecordedRequest) -> None:
        with self._lock:
            for earlier in self.requests:  # retire requests whose client has hung up
                if earlier.finished is None and _peer_closed(earlier._sock):
                    self._retire(earlier, abandoned=True)
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self, request: RecordedRequest, abandoned: bool = False) -> None:
        with self._lock:
            self._retire(request, abandoned)

    def _retire(self, request: RecordedRequest, abandoned: bool) -> None:
        if request.finished is None:  # once, whoever notices first
            self.in_flight -= 1
            request.finished = time.monotonic()
            request.abandoned = abandoned

    def _wait(self, request: RecordedRequest, seconds: float) -> bool:
        """Sleep `seconds`; False (stop answering) when the server closes or the client hangs
        up meanwhile."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return True
            if self._closing.wait(min(0.02, left)):
                return False
            if _peer_closed(request._sock):
                self._leave(request, abandoned=True)
                return False


def _peer_closed(sock: Any) -> bool:
    """The client closed this connection (readable with nothing to read), without blocking."""
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except (OSError, ValueError):
        return True


def _make_handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real API servers do

        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            pass

        def do_POST(self) -> None:
            arrived = time.monotonic()
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            path = self.path.split("?", 1)[0].rstrip("/")
            if path.endswith("/chat/completions"):
                protocol = "openai"
            elif path.endswith("/messages"):
                protocol = "anthropic"
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}}, {})
                return
            request = RecordedRequest(path=self.path, protocol=protocol, json=body,
                                      headers={k.lower(): v for k, v in self.headers.items()},
                                      arrived=arrived, _sock=self.connection)
            server._enter(request)
            try:
                if server.reject_tools and isinstance(body, dict) and body.get("tools"):
                    out = error_body(protocol, 400)
                    out["error"]["message"] = "tools are not supported by this server"
                    self._send(400, out, {})
                    return
                if server.reject_stream and request.streamed:
                    out = error_body(protocol, 400)
                    out["error"]["message"] = "stream is not supported by this server"
                    self._send(400, out, {})
                    return
                reply = server._next_reply(body)
                if reply.delay_s > 0 and not server._wait(request, reply.delay_s):
                    return  # server closing or client gone: abandon the reply
                if reply.status == 200 and request.streamed and not server.ignore_stream:
                    self._stream(request, reply, body, protocol, next(server._ids))
                    return
                if reply.status == 200:
                    out = reply.body if reply.body is not None else success_body(
                        protocol, reply, body if isinstance(body, dict) else {}, next(server._ids))
                else:
                    out = reply.body if reply.body is not None else error_body(
                        protocol, reply.status)
                self._send(reply.status, out, reply.headers)
            except (BrokenPipeError, ConnectionResetError):
                server._leave(request, abandoned=True)  # the client gave up (a timeout test)
            finally:
                server._leave(request)

        def _stream(self, request: RecordedRequest, reply: Reply, body: dict, protocol: str,
                    rid: int) -> None:
            """Answer with server-sent events, in HTTP/1.1 chunked transfer encoding."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            for key, value in reply.headers.items():
                self.send_header(key, value)
            self.end_headers()
            if reply.body is not None:
                events = iter([(None, reply.body)] + ([(None, "[DONE]")]
                                                      if protocol == "openai" else []))
            else:
                events = sse_events(protocol, success_body(protocol, reply, body, rid),
                                    reply.chunks, bool((body.get("stream_options") or {}).get(
                                        "include_usage")))
            for i, (name, data) in enumerate(events):
                if i and reply.chunk_delay_s > 0 and not server._wait(request,
                                                                      reply.chunk_delay_s):
                    return
                if i == 2 and reply.stream_error:  # a little of the answer, then the error
                    name, data = ("error" if protocol == "anthropic" else None), {
                        "type": "error", "error": {"type": reply.stream_error,
                                                   "message": f"scripted {reply.stream_error}"}}
                    self._chunk(((f"event: {name}\n" if name else "")
                                 + f"data: {json.dumps(data)}\n\n").encode())
                    break
                text = data if isinstance(data, str) else json.dumps(data)
                frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
                self._chunk(frame.encode())
            self._chunk(b"")

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

        def _send(self, status: int, out: Any, headers: dict[str, str]) -> None:
            data = out.encode() if isinstance(out, str) else json.dumps(out).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    return _Handler

