"""The two timed processes of a measure job: the candidate's, and the reference's.

The measure job's child is the coordinator (harness/worker/measure.py): it runs no model at all. Before
it does anything else (a fork after OpenMP has started leaves the child's thread pool broken)
it forks two processes with the same command loop, so that both sides of every comparison are
timed the same way, by round trip, paying the same handshake and the same wake-ups:

- the candidate's process imports the problem and the candidate (under the syscall filter,
  like a check job) and builds one `ModelNew` per case; its stage reports, build requests and
  the filter's listener go through the coordinator, which relays them to the worker server;
- the reference process never loads candidate code: it builds the reference `Model` (and the
  torch.compile baseline) per case, and is not dumpable, so the candidate cannot read the
  reference's outputs out of its memory.

Commands, over a socket each:

- `sets`: map a case's input sets read-only (a sealed memfd, harness/worker/shared_inputs.py);
- `batch`: run forward on the listed sets, one call per set, keep every output alive, and
  answer with where each output lies in this process's memory; the coordinator reads the
  candidate's sampled outputs straight from /proc/<pid>/mem, so nothing the candidate's process
  says about its outputs can be computed late;
- `outputs` (reference only): send the bytes of one kept call's outputs, or of the elements the
  coordinator drew from them (harness/protocol/sampled_outputs.py);
- `exit`.
"""
from __future__ import annotations

import os
import socket
from typing import Any

from kernelevolve.harness.protocol import frames
from kernelevolve.harness.protocol.messages import JobRequest
from kernelevolve.harness.worker.context import Containable


class RelayContext(Containable):
    """The JobContext interface (stage, build, contain) over the link to the coordinator,
    for the code shared with check jobs (`candidate.load_candidate`)."""

    def __init__(self, sock: socket.socket, request: JobRequest):
        self.sock, self.request = sock, request
        self.containment = request.containment
        self.contained = False

    def stage(self, name: str) -> None:
        frames.send_frame(self.sock, {"stage": name})

    def build(self, source: str, flags: tuple[str, ...], name: str) -> dict[str, Any]:
        frames.send_frame(self.sock, {"service": {"op": "compile", "source": source,
                                                  "flags": list(flags), "name": name}})
        reply = frames.recv_frame(self.sock)
        return reply.get("reply") if isinstance(reply.get("reply"), dict) else {}

    def hand_over_listener(self, listener: int) -> None:
        """The filter's listener goes to the coordinator, which passes it to the server."""
        frames.send_frame(self.sock, {"listener": True}, [listener])
        os.close(listener)
        if frames.recv_frame(self.sock).get("ack") != "listener":
            raise RuntimeError("the syscall filter's listener was not taken")


ROLES = ("candidate", "reference")
_PR_SET_DUMPABLE = 4


def spawn(request: JobRequest, role: str) -> tuple[int, socket.socket]:
    """Fork one timed process; returns its pid and the coordinator's end of its socket."""
    if role not in ROLES:
        raise ValueError(f"unknown timed process {role!r}")
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the forked process
        mine.close()
        _main(request, theirs, role)
    theirs.close()
    return pid, mine


def _main(request: JobRequest, sock: socket.socket, role: str) -> None:
    """A timed process's whole life; never returns."""
    from kernelevolve.harness.worker.context import close_other_fds

    code = 0
    try:
        close_other_fds({sock.fileno()})  # not the server's channel, not the result file
        (_serve if role == "candidate" else _serve_reference)(request, sock)
    except BaseException:  # noqa: BLE001 - the coordinator reports how it ended
        import traceback

        traceback.print_exc()
        code = 70
    os._exit(code)


def _serve(request: dict[str, Any], sock: socket.socket) -> None:
    from kernelevolve.harness.worker import candidate
    from kernelevolve.harness.worker.session import JobFailure, Session
    from kernelevolve.runtime import cpp

    ctx = RelayContext(sock, request)
    cpp.set_build_service(ctx.build)
    try:
        session = Session(request)
        module = candidate.load_candidate(request, ctx)
        models = {}
        for case in session.cases:
            ctx.stage("load")
            models[case.name] = candidate.build_candidate(session, module, case, request.params.candidate)
    except JobFailure as exc:
        frames.send_frame(sock, {"failed": {"stage": exc.stage, "reason": exc.reason}})
        return
    cpp.stop_counting()  # this process only times: no launch count is read here
    frames.send_frame(sock, {"ready": True})
    _command_loop(sock, session, {(name, "ref"): m for name, m in models.items()},
                  request.params.candidate)


def _serve_reference(request: JobRequest, sock: socket.socket) -> None:
    """The reference's process: the problem's Model (and torch.compile of it) per case."""
    import ctypes

    import torch

    from kernelevolve.harness.worker.session import Session

    # Not dumpable: the candidate's process may not read the reference's outputs (or anything
    # else) out of this process's memory, even where no Yama ptrace policy is set.
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    session = Session(request)
    models = {(c.name, "ref"): session.build(session.module.Model, c) for c in session.cases}
    compile_error = None
    if request.params.baseline == "compile":
        try:
            for case in session.cases:
                fn = torch.compile(models[(case.name, "ref")])
                with torch.no_grad():
                    fn(*session.inputs(case, 1))  # compiles now, outside any timing
                models[(case.name, "compile")] = fn
        except Exception as exc:  # noqa: BLE001 - the baseline's failure is not the candidate's
            models = {k: m for k, m in models.items() if k[1] == "ref"}
            compile_error = f"torch.compile failed: {type(exc).__name__}: {exc}"
    frames.send_frame(sock, {"ready": True, "compile_error": compile_error})
    _command_loop(sock, session, models, request.params.problem, reference=True)


def _command_loop(sock: socket.socket, session, models: dict[tuple[str, str], Any], path: str,
                  reference: bool = False) -> None:
    from kernelevolve.harness.worker.shared_inputs import ReadOnlySets

    sets: dict[str, ReadOnlySets] = {}
    kept: dict[str, list[list[Any]]] = {}  # per model, the last batch's outputs, alive until
    while True:                            # that model's next batch
        msg, fds = _recv_with_fds(sock)
        op = msg.get("op")
        if op == "sets":
            sets[msg["case"]] = ReadOnlySets(fds[0], msg["spec"])
            frames.send_frame(sock, {"attached": True})
        elif op == "batch":
            which = msg.get("model", "ref")
            kept[which] = []
            reply = run_batch(models[(msg["case"], which)], sets[msg["case"]], msg["sets"],
                              msg.get("numbers", {}), kept[which], session, path,
                              first=msg.get("first") is True)
            frames.send_frame(sock, reply)
        elif op == "outputs" and reference:
            send_outputs(sock, kept.get("ref", []), msg.get("call"), msg.get("select"))
        else:
            return


def send_outputs(sock: socket.socket, kept: list[list[Any]], call: Any, select: Any) -> None:
    """One kept call's outputs, or the elements `select` names of each (the coordinator's draw,
    harness/protocol/sampled_outputs.py): a frame with their layout, then their bytes."""
    import torch

    from kernelevolve.harness.protocol.sampled_outputs import gather

    if not isinstance(call, int) or not 0 <= call < len(kept) or not isinstance(select, list) \
            or len(select) != len(kept[call]):
        frames.send_frame(sock, {"outputs": False})
        return
    outs = [gather(t.cpu(), spec) for t, spec in zip(kept[call], select)]
    frames.send_frame(sock, {"outputs": True, "layout": [
        [str(t.dtype).removeprefix("torch."), list(t.shape), t.numel() * t.element_size()]
        for t in outs]})
    for t in outs:
        if t.numel():
            sock.sendall(memoryview(t.reshape(-1).view(torch.uint8).numpy()))


def run_batch(model, sets, indices: list[int], numbers: dict[str, Any], kept: list,
              session, path: str, first: bool = False) -> dict[str, Any]:
    """One call per listed set; outputs kept; their addresses reported (the same loop in the
    reference's process and the candidate's, so both pay the same bookkeeping). `first`: the
    case's first call, untimed (harness/worker/timed_link.py `first_call`)."""
    import torch

    from kernelevolve.harness.worker.errors_fmt import format_exception
    from kernelevolve.harness.worker.session import flatten_outputs

    try:
        with torch.no_grad():
            for k in indices:
                kept.append(flatten_outputs(model(*sets.get(k, numbers.get(str(k), {}))),
                                            "ModelNew.forward"))
        session.platform.synchronize()
    except Exception as exc:  # noqa: BLE001
        during = "on its first call (untimed)" if first else "during a timed batch"
        return {"failed": {"stage": "timing", "reason": f"forward raised {during}:\n"
                           + format_exception(exc, path)}}
    return describe_outputs(kept)


def describe_outputs(kept: list[list[Any]]) -> dict[str, Any]:
    """Where each call's outputs lie: data pointers per call, and the last call's layout."""
    last = kept[-1] if kept else []
    return {"done": True, "ptrs": [[t.data_ptr() for t in outs] for outs in kept],
            "layout": [[str(t.dtype).removeprefix("torch."), list(t.shape), list(t.stride())]
                       for t in last]}


def _recv_with_fds(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    """A frame that may carry descriptors (only the `sets` command does)."""
    import struct

    head, fds, _, _ = socket.recv_fds(sock, 4, 4)
    if not head:
        return {}, fds
    head += frames.recv_exact(sock, 4 - len(head)) if len(head) < 4 else b""
    (size,) = struct.unpack("<I", head)
    if size > frames.MAX_FRAME:
        raise frames.FrameError(f"frame of {size} bytes")
    return frames.parse(frames.recv_exact(sock, size)), fds
