"""NVIDIA CUDA: Triton and CUDA C++ (torch's load_inline) candidates, timed with device events.

Each trial flushes L2 (by writing a buffer twice the L2 size) and synchronises the whole device,
so work a candidate hides on other streams is inside the measured interval.
"""
from __future__ import annotations

import glob
import shutil
import subprocess
from typing import Any, Callable

from kernelevolve.platforms.base import Platform, Timer

_DEFAULT_L2_BYTES = 64 << 20


class EventTimer(Timer):
    def __init__(self) -> None:
        import torch

        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2 = int(getattr(props, "L2_cache_size", 0) or _DEFAULT_L2_BYTES)
        self._flush = torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")
        self._torch = torch

    def time_ms(self, fn: Callable[..., Any], args: list[Any]) -> float:
        torch = self._torch
        self._flush.zero_()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn(*args)
        end.record()
        torch.cuda.synchronize()  # device-wide: covers every stream the candidate used
        return start.elapsed_time(end)


class CudaPlatform(Platform):
    name = "cuda"
    summary = "NVIDIA GPUs: Triton and CUDA C++ timed with device events"
    device = "cuda"
    languages = ("triton", "cuda-cpp", "python")
    default_language = "triton"
    toolkits = {"cuda": "CUDA"}
    env_names = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "CUDA_HOME", "CUDA_PATH",
                 "CUDA_MODULE_LOADING", "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES")
    profile_kinds = ("cuda",)
    measured_languages = ("triton", "cuda-cpp", "python")
    sandbox_devices = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                       "/dev/nvidia-modeset", *sorted(glob.glob("/dev/nvidia[0-9]*")))
    # the driver and NVML read the PCI device tree and the module's version
    sandbox_paths = ("/sys/bus/pci", "/sys/devices", "/sys/module/nvidia", "/proc/driver/nvidia")
    filter_profile = "device"
    jit_languages = ("triton", "cuda-cpp")
    measurement = "inprocess"
    ray_resources = {"GPU": 1}
    device_stream_modules = ("torch.cuda",)
    torch_accelerator = True
    bench_profile = "large"
    limits_memory = False  # the CUDA driver reserves far more address space than RLIMIT_AS allows

    def unavailable_reason(self) -> str | None:
        import torch

        if not (torch.version.cuda and torch.cuda.is_available()):
            return ("no CUDA device is visible to torch here (torch "
                    f"{torch.__version__}); use --platform cpu")
        return None

    def setup_worker(self, threads: int) -> None:
        import torch

        super().setup_worker(threads)
        torch.cuda.init()

    def make_timer(self) -> Timer:
        return EventTimer()

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def fingerprint(self, threads: int) -> dict[str, Any]:
        import torch

        fp = super().fingerprint(threads)
        count = torch.cuda.device_count()
        names = [torch.cuda.get_device_name(i) for i in range(count)]
        fp.update(device=names[0] if names else None, device_count=count, devices=names,
                  cuda=torch.version.cuda, hip=getattr(torch.version, "hip", None),
                  driver=_driver_version(), nvcc=_tool_version("nvcc"),
                  capability=".".join(map(str, torch.cuda.get_device_capability())))
        fp["machine"]["gpu"] = _gpu_properties()
        return fp

    def measure_machine(self, threads: int) -> dict[str, Any]:
        from kernelevolve.platforms.machine_facts import measure_cuda

        return measure_cuda()


def _gpu_properties() -> dict[str, Any]:
    from kernelevolve.platforms.machine_facts import gpu_properties

    try:
        return gpu_properties()
    except Exception as exc:  # noqa: BLE001 - an odd torch build: a fact, not a crash
        return {"error": f"{type(exc).__name__}: {exc}"}


def _driver_version() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else None


def _tool_version(tool: str) -> str | None:
    if not shutil.which(tool):
        return None
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30)
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    return lines[-1].strip() if lines else None
