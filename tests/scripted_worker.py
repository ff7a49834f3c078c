"""A scripted stand-in for the worker server, driven by the real driver-side `Worker`: it speaks
just enough of the protocol to be handed jobs (the ready line, one JSON line per request, the
result file passed over the control socket) and answers each job with `handle(job_id,
result_fd)`, Python source given by the test. Used where the subject is what the driver makes
of a reply (tests/test_messages.py, tests/test_driver_robustness.py), not the sandbox."""
from __future__ import annotations

import sys

from kernelevolve.harness.driver.worker_handle import Worker

PROLOGUE = r'''
import json, os, socket, sys
fd_sock, ARGS = int(sys.argv[1]), sys.argv[2:]
out = os.fdopen(os.dup(1), "wb", buffering=0)
sock = socket.socket(fileno=fd_sock)

def line(obj):
    out.write((json.dumps(obj) + "\n").encode())

def reply(job_id, **extra):
    line({"id": job_id, "status": "exited", "code": 0, "stage": "run", "wall_s": 0.1, **extra})
'''

LOOP = r'''
line(READY)
buf = b""
while True:
    chunk = os.read(0, 1 << 20)
    if not chunk:
        break
    buf += chunk
    while b"\n" in buf:
        raw, buf = buf.split(b"\n", 1)
        msg = json.loads(raw)
        if msg.get("job") == "exit":
            sys.exit(0)
        if "service_reply" in msg:
            continue
        _, fds, _, _ = socket.recv_fds(sock, 64, 2)
        handle(msg["id"], fds[0])
        os.close(fds[0])
'''


def server_source(ready: dict, handler: str) -> str:
    """A whole server script: `ready` is its first line; `handler` defines handle(job_id,
    result_fd) and may read ARGS (the worker's `server_args()`), line() and reply()."""
    return PROLOGUE + f"READY = {ready!r}\n" + handler + LOOP


class ScriptedWorker(Worker):
    """A `Worker` whose server is `script` (see server_source), started with `server_args()`."""
    script = ""

    def server_args(self) -> list[str]:
        return []

    def server_command(self, fd_socket: int) -> list[str]:
        return [sys.executable, "-c", self.script, str(fd_socket), *self.server_args()]
