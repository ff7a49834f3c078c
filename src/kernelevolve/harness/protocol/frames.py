"""Framed messages between processes that do not trust each other's bytes.

Two encodings, both capped and both parsed so that any malformation is a `FrameError` (never a
JSONDecodeError, UnicodeDecodeError or RecursionError escaping into a supervisor):

- lines: one JSON object per `\\n`-terminated line (driver <-> worker server);
- frames: a 4-byte little-endian length, then that many bytes of JSON (job child <-> server,
  over a unix stream socket that can also carry descriptors).

`LineReader` / `FrameReader` are incremental: they take whatever bytes arrived and hand out
complete messages, so a supervisor can `select` on many descriptors and never block on one.
"""
from __future__ import annotations

import json
import socket
import struct
from typing import Any

MAX_LINE = 32 << 20      # a service request carries a C++ source (capped at 8 MiB) as JSON
MAX_FRAME = 16 << 20
MAX_DEPTH = 32


class FrameError(ValueError):
    """Bytes that are not a well-formed message of the protocol."""


def _depth(value: Any, limit: int = MAX_DEPTH) -> int:
    stack, deepest = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def parse(data: bytes) -> dict[str, Any]:
    """A JSON object from untrusted bytes, or FrameError."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FrameError(f"message is not JSON ({type(exc).__name__})") from None
    if not isinstance(value, dict):
        raise FrameError(f"message is a JSON {type(value).__name__}, not an object")
    if _depth(value) > MAX_DEPTH:
        raise FrameError("message nests too deeply")
    return value


def dump_line(msg: dict[str, Any]) -> bytes:
    return (json.dumps(msg, allow_nan=False) + "\n").encode()


def dump_frame(msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg, allow_nan=False).encode()
    return struct.pack("<I", len(body)) + body


class LineReader:
    def __init__(self, limit: int = MAX_LINE):
        self.limit, self._buf = limit, b""

    def feed(self, chunk: bytes) -> list[bytes]:
        self._buf += chunk
        lines = []
        while b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            if len(line) > self.limit:
                raise FrameError(f"line of {len(line)} bytes exceeds {self.limit}")
            lines.append(line)
        if len(self._buf) > self.limit:
            raise FrameError(f"line exceeds {self.limit} bytes")
        return lines


class FrameReader:
    def __init__(self, limit: int = MAX_FRAME):
        self.limit, self._buf = limit, b""

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        self._buf += chunk
        out = []
        while len(self._buf) >= 4:
            (size,) = struct.unpack_from("<I", self._buf)
            if size > self.limit:
                raise FrameError(f"frame of {size} bytes exceeds {self.limit}")
            if len(self._buf) < 4 + size:
                break
            body, self._buf = self._buf[4:4 + size], self._buf[4 + size:]
            out.append(parse(body))
        return out


def send_frame(sock: socket.socket, msg: dict[str, Any], fds: list[int] = ()) -> None:
    data = dump_frame(msg)
    if fds:
        sent = socket.send_fds(sock, [data], list(fds))
        data = data[sent:]
    if data:
        sock.sendall(data)


def recv_frame(sock: socket.socket, limit: int = MAX_FRAME) -> dict[str, Any]:
    """Blocking read of one frame (the job child's side, waiting for a service reply)."""
    head = recv_exact(sock, 4)
    (size,) = struct.unpack("<I", head)
    if size > limit:
        raise FrameError(f"frame of {size} bytes exceeds {limit}")
    return parse(recv_exact(sock, size))


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise FrameError("the channel closed mid-frame")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)
