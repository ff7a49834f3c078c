"""The `toydev` platform: a toy accelerator declaring what a real device declares."""
from __future__ import annotations

import time
from typing import Any, Callable

from kernelevolve.platforms.base import Platform, Timer


class ToyDeviceTimer(Timer):
    def __init__(self) -> None:
        import toydev

        self._clock, self._sync = time.perf_counter_ns, toydev.synchronize  # bound before import

    def time_ms(self, fn: Callable[..., Any], args: list[Any]) -> float:
        self._sync()
        start = self._clock()
        fn(*args)
        self._sync()  # the device's queue drained: its work is inside the interval
        return (self._clock() - start) / 1e6


class ToyDevicePlatform(Platform):
    name = "toydev"
    summary = "a toy accelerator (host memory) timed in process, for the plug-in test"
    device = "cpu"                       # torch device its tensors live on
    languages = ("toydl", "python")
    measured_languages = ("toydl", "python")
    default_language = "toydl"
    measurement = "inprocess"            # its own timer and synchronize, in the candidate's process
    ray_resources = {"toydev": 1}        # a custom Ray resource: `ray start --resources`
    device_stream_modules = ("toydev",)  # toydev.Stream hides work from its timer
    bench_profile = "large"
    prompt_note = "The toy accelerator runs toydev kernels; it is timed in the candidate's process."

    def preload(self) -> list[str]:
        return [*super().preload(), "toydev"]

    def make_timer(self) -> Timer:
        return ToyDeviceTimer()

    def synchronize(self) -> None:
        import toydev

        toydev.synchronize()

    def fingerprint(self, threads: int) -> dict[str, Any]:
        import toydev

        fp = super().fingerprint(threads)
        fp.update(device="toydev accelerator", devices=["toydev accelerator"],
                  toydev_firmware=toydev.FIRMWARE)
        return fp
