"""AMD ROCm: Triton and HIP candidates. torch exposes HIP devices through the `cuda` API, so
timing (events, L2 flush, device-wide synchronise) is the CUDA platform's."""
from __future__ import annotations

import glob
from typing import Any

from kernelevolve.platforms.base import Platform
from kernelevolve.platforms.cuda import CudaPlatform, EventTimer, _gpu_properties, _tool_version


class RocmPlatform(Platform):
    name = "rocm"
    summary = "AMD GPUs under ROCm: Triton and HIP timed with device events"
    device = "cuda"  # torch's device type for HIP tensors
    languages = ("triton", "hip", "python")
    default_language = "triton"
    toolkits = {"hip": "HIP"}
    env_names = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "ROCM_PATH", "HIP_PATH",
                 "HSA_OVERRIDE_GFX_VERSION")
    profile_kinds = ("cuda",)  # torch.profiler reports HIP kernels as CUDA activity
    measured_languages = ("triton", "hip", "python")
    sandbox_devices = ("/dev/kfd", "/dev/dri", *sorted(glob.glob("/dev/dri/renderD*")))
    # the runtime reads the KFD topology and the PCI/DRM trees; ROCm itself lives in /opt
    sandbox_paths = ("/sys/class/kfd", "/sys/devices", "/sys/bus/pci", "/sys/class/drm",
                     "/sys/module/amdgpu", "/opt/rocm", *sorted(glob.glob("/opt/rocm-*")))
    filter_profile = "device"
    jit_languages = ("triton", "hip")
    limits_memory = False
    measurement = "inprocess"
    ray_resources = {"GPU": 1}           # Ray counts AMD GPUs as GPU too
    device_stream_modules = ("torch.cuda",)  # torch's HIP API is torch.cuda
    torch_accelerator = True
    bench_profile = "large"

    def unavailable_reason(self) -> str | None:
        import torch

        if not (getattr(torch.version, "hip", None) and torch.cuda.is_available()):
            return ("no ROCm device is visible to torch here (torch "
                    f"{torch.__version__}); use --platform cpu")
        return None

    setup_worker = CudaPlatform.setup_worker
    synchronize = CudaPlatform.synchronize

    def make_timer(self) -> EventTimer:
        return EventTimer()

    def fingerprint(self, threads: int) -> dict[str, Any]:
        import torch

        fp = super().fingerprint(threads)
        count = torch.cuda.device_count()
        names = [torch.cuda.get_device_name(i) for i in range(count)]
        fp.update(device=names[0] if names else None, device_count=count, devices=names,
                  hip=torch.version.hip, hipcc=_tool_version("hipcc"))
        fp["machine"]["gpu"] = _gpu_properties()
        return fp

    measure_machine = CudaPlatform.measure_machine
