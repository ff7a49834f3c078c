"""Rejections that teach, on the timed path (harness/worker/timed_link.py, harness/worker/link_faults.py).

A C++ candidate that builds its library on the first `forward` was rejected at timing with "the
candidate's process answered a timed batch with a malformed message": its build request reached
the coordinator, which was waiting for the batch's answer. The case's first call now runs
untimed, with build requests served, before any batch is timed; a build asked for later is
refused with its cause named. How a timed process ended is told from its exit status, as the
coordinator sees it, with what to do.
"""
from __future__ import annotations

import os
import signal
import socket

import pytest

from conftest import example
from kernelevolve.harness.protocol import frames
from kernelevolve.harness.worker import link_faults
from kernelevolve.harness.worker.session import JobFailure
from kernelevolve.harness.worker.timed_link import TimedProcess

DOUBLE = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
'''

# `build_at` is the call on which forward builds its library: 1 is the common lazy pattern.
LAZY = '''
import ctypes
import torch
import torch.nn as nn
from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cstdint>
extern "C" void twice(const float* x, float* y, int64_t n) {{
    for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i];
}}
"""
_lib = None
_calls = [0]


def _build(name):
    lib = load_cpp(SRC, name=name)
    lib.twice.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    lib.twice.restype = None
    return lib


class ModelNew(nn.Module):
    def forward(self, x):
        global _lib
        _calls[0] += 1
        if _lib is None:
            _lib = _build("lazy_twice")
        if _calls[0] == {build_at}:  # a second library, built late
            _lib = _build("late_twice")
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.twice(ptr(x), ptr(y), x.numel())
        return y
'''


@pytest.mark.slow
def test_a_library_built_on_the_first_forward_is_built_untimed_and_accepted(evaluator, write):
    problem = write("double.py", DOUBLE)
    result = evaluator.evaluate(problem, write("lazy.py", LAZY.format(build_at=1)))
    assert result.accepted and result.measured, result.reason
    assert result.speedup and result.speedup > 0
    assert "malformed" not in result.reason


@pytest.mark.slow
def test_the_in_process_protocol_builds_a_lazy_library_untimed_too(evaluator, write):
    """Devices time in the candidate's own process (harness/worker/measure_inprocess.py): the lazy
    library is accepted there too, built on the case's first call, made before timing (with no
    warm-up calls, it would otherwise land in a timed sample)."""
    from dataclasses import replace

    opts = replace(evaluator.options, measurement="inprocess",
                   timing=replace(evaluator.options.timing, warmup=0))
    result = evaluator.evaluate(write("double.py", DOUBLE),
                                write("lazy.py", LAZY.format(build_at=1)), options=opts)
    assert result.accepted and result.measured, result.reason


@pytest.mark.slow
def test_a_library_built_during_a_timed_batch_is_rejected_with_its_cause(evaluator, write):
    # Call 60: past the check job's calls and the measure job's untimed first call, inside the
    # first (warm-up) batch, whose calls are timed like every other batch's.
    problem = write("double.py", DOUBLE)
    result = evaluator.evaluate(problem, write("late.py", LAZY.format(build_at=60)))
    assert not result.accepted and result.stage == "timing", (result.stage, result.reason)
    assert result.reason == link_faults.LATE_BUILD
    assert "library was built inside forward" in result.reason
    assert "build every library at import" in result.reason
    assert "malformed" not in result.reason


def test_the_contract_says_to_build_at_import():
    from kernelevolve.operators.prompt import PromptBuilder

    cpp = PromptBuilder(str(example("softmax")), "cpu", "cpp").contract()
    assert "Build it at import (`lib = load_cpp(...)` at module level)" in cpp
    assert "not lazily inside `forward`" in cpp
    cuda = PromptBuilder(str(example("softmax")), "cpu", "cuda-cpp").contract()
    assert "called at import (module level), not\n  lazily inside `forward`" in cuda


# ---- how a timed process ended, from the coordinator's side of a real process -------------
def _timed(child) -> TimedProcess:
    """A real forked process on a real socket, in the candidate's role; `child(sock)` is its
    whole life (it never returns)."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked process
        mine.close()
        try:
            child(theirs)
        finally:
            os._exit(99)
    theirs.close()
    return TimedProcess(pid, mine, "candidate")


def _reason(proc: TimedProcess) -> str:
    try:
        with pytest.raises(JobFailure) as info:
            proc.batch("c", [0], {})
        return info.value.reason
    finally:
        proc.close()


def _wait_for_batch(sock) -> None:
    frames.recv_frame(sock)


def test_an_exit_during_a_timed_batch_names_the_status_and_what_to_do():
    def child(sock):
        _wait_for_batch(sock)
        os._exit(3)

    reason = _reason(_timed(child))
    assert reason.startswith("the candidate's process exited with status 3 (the candidate's "
                             "code or its library ended the process")
    assert "return from forward instead" in reason and "during a timed batch" in reason


def test_a_systemexit_in_forward_is_named():
    def child(sock):
        _wait_for_batch(sock)
        os._exit(70)  # candidate_proc._main's status for a BaseException out of forward

    reason = _reason(_timed(child))
    assert "exited with status 70" in reason and "SystemExit" in reason


@pytest.mark.parametrize("sig,words", [(signal.SIGSEGV, "out-of-bounds read or write"),
                                       (signal.SIGABRT, "abort() was called"),
                                       (signal.SIGFPE, "division by zero")])
def test_a_signal_during_a_timed_batch_names_its_likely_cause(sig, words):
    def child(sock):
        _wait_for_batch(sock)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)

    reason = _reason(_timed(child))
    assert f"died from {signal.Signals(sig).name} (" in reason and words in reason


def test_bytes_that_are_no_message_are_named_as_a_write_to_the_harness_channel():
    def child(sock):
        _wait_for_batch(sock)
        sock.sendall(b"\xff\xff\xff\x7fnot a frame")
        signal.pause()

    reason = _reason(_timed(child))
    assert "wrote bytes that are not the harness's messages" in reason
    assert "file descriptor it did not open" in reason and "malformed" not in reason


def test_a_message_that_is_not_the_answer_is_named():
    def child(sock):
        _wait_for_batch(sock)
        frames.send_frame(sock, {"stage": "run"})
        signal.pause()

    reason = _reason(_timed(child))
    assert "sent the harness a message that is not its answer during a timed batch" in reason
    assert "malformed" not in reason


def test_a_build_request_during_a_timed_batch_is_the_late_build():
    def child(sock):
        _wait_for_batch(sock)
        frames.send_frame(sock, {"service": {"op": "compile", "source": "", "flags": [],
                                             "name": "k"}})
        signal.pause()

    assert _reason(_timed(child)) == link_faults.LATE_BUILD


def test_a_channel_closed_by_a_live_process_is_named():
    def child(sock):
        _wait_for_batch(sock)
        sock.close()
        signal.pause()

    reason = _reason(_timed(child))
    assert "closed its channel to the harness during a timed batch but kept running" in reason
