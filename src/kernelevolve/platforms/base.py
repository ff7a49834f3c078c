"""What a platform must provide: device, languages, worker environment, timer and fingerprint.

A platform is one `Platform` subclass in one module, registered by name: the built-ins in
`kernelevolve/plugins.py`, others through the `kernelevolve.platforms` entry-point group;
`plugins.get_platform(name)` finds it and checks the shape. No module outside `platforms/` and
`languages/` branches on a platform's name: what varies is an attribute or a method here.
Driver-side methods run in the trusted process; `setup_worker`, `make_timer` and `fingerprint`
run inside the sandboxed worker (so they describe the machine that measured).
"""
from __future__ import annotations

import os
import platform as _pyplatform
from typing import Any, Callable

from kernelevolve import knobs

# SIMD and matrix flags worth recording; the full /proc/cpuinfo list is ~100 names of noise.
_CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
              "avx512_bf16", "avx512_fp16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16",
              "amx_int8", "asimd", "sve", "sve2")


class Timer:
    """Times one call on a device. `time_ms(fn, args)` returns milliseconds of device work."""

    def time_ms(self, fn: Callable[..., Any], args: list[Any]) -> float:  # pragma: no cover
        raise NotImplementedError


class Platform:
    name: str = ""
    summary: str = ""                   # one line for `kernelevolve targets`
    device: str = "cpu"                 # torch device type the problem's tensors move to
    languages: tuple[str, ...] = ()     # candidate languages this platform evaluates
    default_language: str = "python"    # what the LLM writes and synth drafts unless told
    measured_languages: tuple[str, ...] = ()  # languages it can also time for real
    interpreted_languages: tuple[str, ...] = ()  # run by an interpreter: longer stage limits
    sandbox_devices: tuple[str, ...] = ()     # device nodes the sandbox must expose
    # Read-only paths its driver or toolkit needs besides the system and Python (the sandbox
    # shows nothing else: harness/containment/allowlist.py): sysfs device trees, a toolkit under /opt.
    sandbox_paths: tuple[str, ...] = ()
    limits_memory: bool = True          # whether RLIMIT_AS can be applied (not with GPU drivers)
    # The syscall filter's profile for jobs running candidate code (harness/containment/seccomp.py):
    # "strict" opens no file for writing; "device" may open existing files read-write, which GPU
    # drivers do with their device nodes long after the job started (Landlock limits it to them).
    filter_profile: str = "strict"
    # Languages whose compiler runs inside the candidate's own process at first call (Triton's
    # JIT on a GPU, load_inline): those jobs run under the syscall filter's "jit" profile.
    jit_languages: tuple[str, ...] = ()
    # Fingerprint keys naming this platform's toolkit versions (major version must match for a
    # registered kernel to be served), with their label in prompts and notes.
    toolkits: dict[str, str] = {}
    # torch.profiler activity kinds of the device profile (harness/worker/gpu_profile.py); () none.
    profile_kinds: tuple[str, ...] = ()
    # Variables of the user's environment its workers get (device selection, toolkit paths).
    env_names: tuple[str, ...] = ()
    # Fixed text for the prompt's target section (e.g. how this platform times), or "".
    prompt_note: str = ""
    # How a candidate is timed: "outside" its process, by a second process reading a shared
    # clock (harness/worker/measure.py: CPU work is synchronous), or "inprocess" with the
    # platform's timer and `synchronize` (harness/worker/measure_inprocess.py: devices).
    measurement: str = "outside"
    # Ray resources each evaluation actor reserves besides CPUs: {"GPU": 1} on a GPU; a device
    # Ray does not know names its own custom resource ({"npu": 1}); {} on the host CPU.
    ray_resources: dict[str, float] = {}
    # Modules whose stream API (Stream, set_stream...) hides work from this device's timer: the
    # static gate refuses it and the integrity probe watches these modules for patches.
    device_stream_modules: tuple[str, ...] = ()
    # Whether its tensors live on a torch accelerator runtime (CUDA, HIP...): False seeds only
    # torch's CPU generator while none has started (torch.manual_seed seeds them all, at a cost
    # per call; harness/worker/session.py).
    torch_accelerator: bool = False
    # The aten suite's default size for compiled languages ("small" for interpreted ones).
    bench_profile: str = "medium"

    # ---- driver side ---------------------------------------------------------------------
    def unavailable_reason(self) -> str | None:
        """None when usable here, else one line saying what is missing."""
        return None

    def worker_env(self, threads: int) -> dict[str, str]:
        # PASSIVE: torch's OpenMP runtime and a candidate's (g++'s libgomp) share the cores; with
        # the default spin-wait, each runtime's idle threads steal the other's cores during
        # interleaved timing (seen: a 20k-element kernel at 8 ms instead of 0.02 ms).
        # OPENBLAS_THREAD_TIMEOUT=4: numpy's OpenBLAS threads wait 2^4 cycles, not the default
        # 2^28 (~0.1 s of a core each, spinning after every call); a spinning pool steals a core
        # from whatever runs next and blurs the check that a candidate's threads are idle.
        # GLIBC_TUNABLES: a timed batch keeps every call's output alive (the outside check reads
        # one of them afterwards), so each call allocates afresh; without these, glibc maps big
        # buffers anew and hands freed memory back, and every call pays ~1000 page faults for a
        # 4 MB output (seen: eager softmax on 512x2048, 0.36 -> 0.85 ms a call). Freed memory now
        # stays mapped for reuse.
        # OMP_PROC_BIND/OMP_PLACES: one OpenMP thread per core. The candidate runs in a process
        # of its own, whose team's worker the scheduler's wake-affine logic kept putting on the
        # main thread's core (its CPU time was 1.2x its wall time: softmax measured 0.15x, not
        # 0.20x). Threads bind themselves; the syscall filter lets a thread set the affinity
        # of its own process's threads only.
        return {"OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
                "OPENBLAS_NUM_THREADS": str(threads), "OMP_WAIT_POLICY": "PASSIVE",
                "OMP_PROC_BIND": "true", "OMP_PLACES": "cores",
                "OPENBLAS_THREAD_TIMEOUT": "4",
                "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=33554432:"
                                  "glibc.malloc.trim_threshold=17179869184"}

    def preload(self) -> list[str]:
        """Modules the worker server imports once before forking children."""
        # torch._dynamo rebinds torch.manual_seed when first imported (~1 s); importing it in
        # the server keeps that out of every job and out of the integrity snapshot's view.
        return ["torch", "numpy", "torch._dynamo", "torch.utils._python_dispatch"]

    def measures(self, language: str) -> bool:
        return language in self.measured_languages

    def filter_profile_for(self, language: str, compiles_in_process: bool) -> str:
        """The syscall filter's profile for a candidate (harness/containment/seccomp.py)."""
        return "jit" if compiles_in_process or language in self.jit_languages \
            else self.filter_profile

    # ---- worker side ---------------------------------------------------------------------
    def setup_worker(self, threads: int) -> None:
        import torch

        torch.set_num_threads(threads)

    def make_timer(self) -> Timer:  # pragma: no cover - each platform provides one
        raise NotImplementedError

    def synchronize(self) -> None:
        pass

    def fingerprint(self, threads: int) -> dict[str, Any]:
        import torch

        from kernelevolve.runtime.cpp import compiler_version

        fp: dict[str, Any] = {
            "platform": self.name,
            "hostname": _pyplatform.node(),
            "os": f"{_pyplatform.system()} {_pyplatform.release()}",
            "python": _pyplatform.python_version(),
            "torch": torch.__version__,
            "cpu_model": _cpu_model(),
            "cpu_flags": _cpu_flags(),
            "cpu_count": os.cpu_count(),
            "threads": threads,
            "omp_wait_policy": knobs.omp_wait_policy(),
            # device fields: the CPU itself here; GPU platforms overwrite them
            "device": _cpu_model(),
            "device_count": 1,
            "devices": [_cpu_model()],
            "driver": None,
        }
        try:
            fp["cxx"] = compiler_version()
        except Exception as exc:  # noqa: BLE001 - a missing compiler is a fact, not a crash
            fp["cxx"] = f"unavailable ({exc})"
        from kernelevolve.platforms.machine_facts import static_facts

        fp["machine"] = static_facts()  # caches, cores, page policy; the pool adds the figures
        return fp

    def measure_machine(self, threads: int) -> dict[str, Any]:
        """Memory bandwidth and peak FLOP/s of what this platform computes on (about a second;
        the pool caches them per machine). Runs in the worker, like `fingerprint`."""
        from kernelevolve.platforms.machine_facts import measure_cpu

        return measure_cpu(threads)


def _cpuinfo_field(name: str) -> str | None:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.split(":")[0].strip() == name:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _cpu_model() -> str:
    return _cpuinfo_field("model name") or _pyplatform.processor() or _pyplatform.machine()


def _cpu_flags() -> list[str]:
    flags = set((_cpuinfo_field("flags") or _cpuinfo_field("Features") or "").split())
    return [f for f in _CPU_FLAGS if f in flags]
