"""The `toy` platform: this machine's CPU, running `toyl` kernels (and plain PyTorch)."""
from __future__ import annotations

import time
from typing import Any, Callable

from kernelevolve.platforms.base import Platform, Timer


class WallTimer(Timer):
    def __init__(self) -> None:
        self._clock = time.perf_counter_ns  # bound before any candidate is imported

    def time_ms(self, fn: Callable[..., Any], args: list[Any]) -> float:
        start = self._clock()
        fn(*args)
        return (self._clock() - start) / 1e6


class ToyPlatform(Platform):
    name = "toy"
    summary = "a toy accelerator (the host CPU) for the plug-in test"
    device = "cpu"                       # torch device its tensors live on
    languages = ("toyl", "python")
    measured_languages = ("toyl", "python")
    default_language = "toyl"
    prompt_note = "The toy accelerator runs toykern kernels one call at a time."

    def make_timer(self) -> Timer:
        return WallTimer()

    def fingerprint(self, threads: int) -> dict[str, Any]:
        fp = super().fingerprint(threads)
        fp["toy_firmware"] = "1.0"
        return fp
