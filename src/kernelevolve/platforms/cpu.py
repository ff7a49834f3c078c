"""CPU: C++ candidates (load_cpp) timed for real; Triton checked under the interpreter only.

The Triton interpreter is ~5000x slower than eager PyTorch, so a Triton candidate on CPU is
reported accepted-but-unmeasured (speedup null) instead of with a meaningless number.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from kernelevolve.platforms.base import Platform, Timer


class CpuTimer(Timer):
    def __init__(self) -> None:
        # Bound now, before any candidate is imported: patching time.perf_counter_ns later
        # cannot reach this clock (and the integrity probe reports the attempt).
        self._clock = time.perf_counter_ns

    def time_ms(self, fn: Callable[..., Any], args: list[Any]) -> float:
        # CPU torch ops are synchronous, so the wall time of the call is the work's time.
        clock = self._clock
        start = clock()
        fn(*args)
        return (clock() - start) / 1e6


class CpuPlatform(Platform):
    name = "cpu"
    summary = "this machine's CPU: C++ timed from outside the candidate's process"
    device = "cpu"
    languages = ("cpp", "triton", "python")
    default_language = "cpp"
    measured_languages = ("cpp", "python")
    interpreted_languages = ("triton",)  # TRITON_INTERPRET=1: ~5000x slower than PyTorch

    def worker_env(self, threads: int) -> dict[str, str]:
        return {**super().worker_env(threads), "TRITON_INTERPRET": "1"}

    def make_timer(self) -> Timer:
        return CpuTimer()
