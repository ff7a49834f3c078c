"""Measured machine facts: memory bandwidth, peak FLOP/s, caches, cores, page policy, GPU.

Two halves, both run inside the sandboxed worker (so they describe the machine that measures,
a Ray node's too): `static_facts()` reads /sys and /proc (cheap, taken with every fingerprint),
`measure_cpu()` / `measure_cuda()` time a STREAM-like copy and triad and a large `torch.mm`
(about a second; the pool caches their figures per machine, see `cache_key()`). The trusted
driver reads and writes that cache; these functions only measure.

`machine_lines(fingerprint)` renders the facts as short lines for prompts, `show` and reports.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

FACTS_VERSION = 1            # bump when what is measured (or how) changes: old caches are ignored
DTYPES = ("float32", "float16", "bfloat16")
SHORT = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}
_REPS = 4                    # best of this many timed repetitions (after one warm-up)

# CPU flags that mean the hardware computes a dtype natively (x86, then aarch64 names).
_NATIVE = {"bfloat16": ("avx512_bf16", "amx_bf16", "bf16"),
           "float16": ("avx512_fp16", "amx_fp16")}


# ---- static facts (read, not measured) ----------------------------------------------------------
def static_facts() -> dict[str, Any]:
    """Caches, cores and the transparent-huge-page policy of this machine."""
    return {"version": FACTS_VERSION, "caches": cache_sizes(), "cores": core_counts(),
            "thp": huge_page_policy()}


def cache_sizes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> list[dict[str, Any]]:
    """cpu0's caches: [{"name": "L1d", "level": 1, "type": "Data", "size": "48K", "bytes": ...}]."""
    out = []
    for index in sorted(Path(root).glob("index*")):
        try:
            level = int((index / "level").read_text().strip())
            kind = (index / "type").read_text().strip()
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        suffix = {"Data": "d", "Instruction": "i"}.get(kind, "")
        nbytes = _size_bytes(size)
        out.append({"name": f"L{level}{suffix}", "level": level, "type": kind,
                    "size": _bytes(nbytes) if nbytes else size, "bytes": nbytes})
    return out


def _size_bytes(text: str) -> int | None:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    try:
        return int(text.rstrip("KMG")) * scale
    except ValueError:
        return None


def last_level_bytes(caches: list[dict[str, Any]]) -> int | None:
    data = [c for c in caches if c.get("bytes") and c.get("type") != "Instruction"]
    top = max((c["level"] for c in data), default=None)
    return max((c["bytes"] for c in data if c["level"] == top), default=None)


def core_counts() -> dict[str, Any]:
    """Physical cores (distinct package/core pairs of online CPUs) and logical CPUs. (Not the
    affinity mask: inside a worker, OpenMP's binding has pinned the main thread to one core.)"""
    pairs = set()
    for cpu in Path("/sys/devices/system/cpu").glob("cpu[0-9]*"):
        try:
            pkg = (cpu / "topology" / "physical_package_id").read_text().strip()
            core = (cpu / "topology" / "core_id").read_text().strip()
        except OSError:
            continue
        online = cpu / "online"
        if online.exists() and online.read_text().strip() == "0":
            continue
        pairs.add((pkg, core))
    return {"physical": len(pairs) or None, "logical": os.cpu_count()}


def huge_page_policy(root: str = "/sys/kernel/mm/transparent_hugepage") -> dict[str, Any]:
    """The bracketed choices of THP `enabled` and `defrag`, or None with why."""
    out: dict[str, Any] = {}
    for name in ("enabled", "defrag"):
        try:
            text = Path(root, name).read_text()
        except OSError as exc:
            return {"enabled": None, "defrag": None,
                    "why": f"{root}/{name}: {exc.strerror or exc}"}
        chosen = [w[1:-1] for w in text.split() if w.startswith("[") and w.endswith("]")]
        out[name] = chosen[0] if chosen else text.strip() or None
    return out


def cpu_flag_set() -> set[str]:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                key = line.split(":")[0].strip()
                if key in ("flags", "Features"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def gpu_properties(index: int = 0) -> dict[str, Any]:
    """torch.cuda.get_device_properties, the fields this torch exposes (CUDA and HIP)."""
    import torch

    props = torch.cuda.get_device_properties(index)
    out: dict[str, Any] = {"name": props.name, "sms": props.multi_processor_count,
                           "memory_bytes": int(props.total_memory)}
    for key, attr in (("l2_bytes", "L2_cache_size"), ("clock_khz", "clock_rate"),
                      ("memory_clock_khz", "memory_clock_rate"),
                      ("memory_bus_bits", "memory_bus_width"), ("warp_size", "warp_size"),
                      ("max_threads_per_sm", "max_threads_per_multi_processor"),
                      ("shared_memory_per_sm", "shared_memory_per_multiprocessor"),
                      ("regs_per_sm", "regs_per_multiprocessor"), ("arch", "gcnArchName")):
        value = getattr(props, attr, None)
        if value not in (None, "", 0):
            out[key] = value if isinstance(value, str) else int(value)
    if torch.version.cuda:
        out["capability"] = f"{props.major}.{props.minor}"
    if out.get("memory_clock_khz") and out.get("memory_bus_bits"):  # DDR: two transfers a clock
        out["spec_gbs"] = round(2 * out["memory_clock_khz"] * 1e3 * out["memory_bus_bits"] / 8
                                / 1e9, 1)
    return out


# ---- measured figures ---------------------------------------------------------------------------
def measure_cpu(threads: int) -> dict[str, Any]:
    """STREAM-like copy and triad on arrays far beyond the last-level cache, and torch.mm, with
    the worker's threads; best of a few repetitions. fp16/bf16 only where the CPU flags say the
    hardware has them (elsewhere torch converts, and a "peak" would describe the conversion)."""
    import torch

    started = time.perf_counter()
    torch.set_num_threads(threads)
    llc = last_level_bytes(cache_sizes()) or (32 << 20)
    # Twice the last level, within 64-128 MiB an array: four times a desktop's L3 and more for
    # the triad. A server's L3 can be larger (260 MiB on this project's 2-core VM, shared with
    # other tenants), but 512 MiB arrays cost 2-5 s of page faults and copies on two cores and
    # measured the same within noise; the figure may hold a few cache hits there.
    n = min(max(2 * llc, 64 << 20), 128 << 20) // 4
    a = torch.ones(n, dtype=torch.float32)
    b = torch.empty_like(a)
    copy_s = _best(lambda: b.copy_(a), _REPS)
    c = torch.empty_like(a)
    triad_s = _best(lambda: torch.add(b, c, alpha=3.0, out=a), _REPS)
    a = b = c = None  # free the arrays (the timed lambdas hold the names, not a del)
    copy_gbs, triad_gbs = 2 * 4 * n / copy_s / 1e9, 3 * 4 * n / triad_s / 1e9
    kernel, gbs = max((("copy", copy_gbs), ("triad", triad_gbs)), key=lambda kv: kv[1])
    flags = cpu_flag_set()
    size = 2048 if threads > 8 else 1024
    peaks: dict[str, Any] = {}
    skipped = {}
    for dtype in DTYPES:
        native = _NATIVE.get(dtype, ())
        if native and not flags & set(native):
            skipped[dtype] = "no " + "/".join(native[:2]) + " in the CPU flags"
            continue
        peaks[dtype] = _peak_mm(torch, getattr(torch, dtype), size, "cpu", None)
    return {"version": FACTS_VERSION, "device": "cpu", "threads": threads,
            "memory_bandwidth": {"gbs": round(gbs, 2), "kernel": kernel, "threads": threads,
                                 "copy_gbs": round(copy_gbs, 2), "triad_gbs": round(triad_gbs, 2),
                                 "array_bytes": 4 * n},
            "peak_gflops": peaks, "peak_skipped": skipped,
            "measured_s": round(time.perf_counter() - started, 3), "measured_at": time.time()}


def measure_cuda() -> dict[str, Any]:
    """Device copy and triad bandwidth and torch.mm peaks (fp32, fp16, bf16), timed with events."""
    import torch

    started = time.perf_counter()
    dev = torch.device("cuda", torch.cuda.current_device())
    total = torch.cuda.get_device_properties(dev).total_memory
    n = min(1 << 30, total // 16) // 4  # 1 GiB arrays (three for the triad), less on small GPUs
    a = torch.ones(n, dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    copy_s = _best_cuda(torch, lambda: b.copy_(a), _REPS + 2)
    c = torch.empty_like(a)
    triad_s = _best_cuda(torch, lambda: torch.add(b, c, alpha=3.0, out=a), _REPS + 2)
    a = b = c = None  # free the arrays (the timed lambdas hold the names, not a del)
    torch.cuda.empty_cache()
    copy_gbs, triad_gbs = 2 * 4 * n / copy_s / 1e9, 3 * 4 * n / triad_s / 1e9
    kernel, gbs = max((("copy", copy_gbs), ("triad", triad_gbs)), key=lambda kv: kv[1])
    peaks = {}
    for dtype in DTYPES:
        size = 4096 if dtype == "float32" else 8192
        try:
            peaks[dtype] = _peak_mm(torch, getattr(torch, dtype), size, dev, torch)
        except RuntimeError as exc:  # an old GPU without bf16: a fact, not a failure
            peaks.setdefault("errors", {})[dtype] = str(exc).splitlines()[0][:200]
    errors = peaks.pop("errors", None)
    tf32 = bool(torch.backends.cuda.matmul.allow_tf32)
    if "float32" in peaks:
        peaks["float32"]["tf32"] = tf32
    return {"version": FACTS_VERSION, "device": torch.cuda.get_device_name(dev),
            "memory_bandwidth": {"gbs": round(gbs, 1), "kernel": kernel, "threads": None,
                                 "copy_gbs": round(copy_gbs, 1), "triad_gbs": round(triad_gbs, 1),
                                 "array_bytes": 4 * n},
            "peak_gflops": peaks, "peak_skipped": errors or {},
            "measured_s": round(time.perf_counter() - started, 3), "measured_at": time.time()}


def _peak_mm(torch: Any, dtype: Any, size: int, device: Any, cuda: Any) -> dict[str, Any]:
    x = torch.randn(size, size, device=device).to(dtype)
    y = torch.randn(size, size, device=device).to(dtype)
    out = torch.empty(size, size, device=device, dtype=dtype)
    fn = lambda: torch.mm(x, y, out=out)  # noqa: E731
    seconds = _best_cuda(cuda, fn, _REPS + 2) if cuda is not None else _best(fn, _REPS - 1)
    return {"gflops": round(2 * size ** 3 / seconds / 1e9, 1), "how": f"torch.mm {size}^3"}


def _best(fn: Any, reps: int) -> float:
    fn()  # warm-up: first touch of fresh pages, thread pool start
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _best_cuda(torch: Any, fn: Any, reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3)
    return best


# ---- the driver's cache -------------------------------------------------------------------------
KEY_FIELDS = ("platform", "hostname", "cpu_model", "cpu_count", "threads", "torch", "devices")


def cache_key(fingerprint: dict[str, Any]) -> str:
    """What identifies the machine and toolchain whose figures a cache file holds."""
    ident = {k: fingerprint.get(k) for k in KEY_FIELDS}
    ident["version"] = FACTS_VERSION
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:24]


def cache_path(fingerprint: dict[str, Any], root: Path | None = None) -> Path:
    from kernelevolve import knobs

    return Path(root or knobs.cache_dir()) / "machines" / f"{cache_key(fingerprint)}.json"


def read_cached(path: Path) -> dict[str, Any] | None:
    """The cached figures, or None when absent, unreadable or from another FACTS_VERSION."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != FACTS_VERSION \
            or not isinstance(data.get("memory_bandwidth"), dict):
        return None
    return data


def write_cached(path: Path, figures: dict[str, Any]) -> str | None:
    """Write atomically (pools on one machine may race); None, or why it could not."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(figures, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    return None


# ---- figures for the roofline, and lines for people and prompts ---------------------------------
def bandwidth_gbs(fingerprint: dict[str, Any] | None) -> float | None:
    bw = ((fingerprint or {}).get("machine") or {}).get("memory_bandwidth") or {}
    value = bw.get("gbs")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def peak_gflops(fingerprint: dict[str, Any] | None, dtype: str) -> tuple[float | None, str]:
    """The measured peak for `dtype` ("float32"...), else fp32's (what torch converts to);
    returns (GFLOP/s, the dtype whose peak it is)."""
    peaks = ((fingerprint or {}).get("machine") or {}).get("peak_gflops") or {}
    for name in (dtype, "float32"):
        value = (peaks.get(name) or {}).get("gflops")
        if isinstance(value, (int, float)) and value > 0:
            return float(value), name
    return None, dtype


def machine_lines(fingerprint: dict[str, Any] | None) -> list[str]:
    """Short human lines for the measuring machine (fingerprint["machine"]); [] when absent.

    e.g. "memory bandwidth 12.3 GB/s (copy, 2 threads)", "peak fp32 95 GFLOP/s (torch.mm
    1024^3)", "caches L1d 48K, L2 2M, L3 260M", "cores 2 physical/2 logical",
    "transparent huge pages: madvise (defrag madvise)"."""
    fp = fingerprint or {}
    m = fp.get("machine") if isinstance(fp.get("machine"), dict) else None
    if m is None:
        return []
    lines = []
    gpu = m.get("gpu") or {}
    if gpu:
        parts = [f"{gpu['sms']} SMs" if gpu.get("sms") else "",
                 _bytes(gpu.get("memory_bytes")) + " memory" if gpu.get("memory_bytes") else "",
                 f"L2 {_bytes(gpu['l2_bytes'])}" if gpu.get("l2_bytes") else "",
                 f"{gpu['clock_khz'] / 1e6:.2f} GHz" if gpu.get("clock_khz") else "",
                 f"capability {gpu['capability']}" if gpu.get("capability") else "",
                 f"spec bandwidth {gpu['spec_gbs']:.0f} GB/s" if gpu.get("spec_gbs") else ""]
        lines.append(f"GPU {gpu.get('name', '?')}: " + ", ".join(p for p in parts if p))
    bw = m.get("memory_bandwidth") or {}
    if bw.get("gbs"):
        where = f"{bw['threads']} threads" if bw.get("threads") else "device memory"
        lines.append(f"memory bandwidth {_num(bw['gbs'])} GB/s ({bw.get('kernel', 'copy')}, "
                     f"{where})")
    elif m.get("error"):
        lines.append(f"machine figures not measured: {m['error']}")
    for dtype, peak in (m.get("peak_gflops") or {}).items():
        if isinstance(peak, dict) and peak.get("gflops"):
            tf32 = ", TF32 on" if peak.get("tf32") else ""
            lines.append(f"peak {SHORT.get(dtype, dtype)} {_num(peak['gflops'])} GFLOP/s "
                         f"({peak.get('how', 'torch.mm')}{tf32})")
    for dtype, why in (m.get("peak_skipped") or {}).items():
        lines.append(f"peak {SHORT.get(dtype, dtype)} not measured: {why}")
    caches = m.get("caches") or []
    if caches:
        lines.append("caches " + ", ".join(f"{c['name']} {c['size']}" for c in caches))
    cores = m.get("cores") or {}
    if cores.get("logical"):
        lines.append(f"cores {cores.get('physical') or '?'} physical/{cores['logical']} logical")
    thp = m.get("thp") or {}
    if thp.get("enabled"):
        lines.append(f"transparent huge pages: {thp['enabled']} (defrag {thp.get('defrag')})")
    elif thp:
        lines.append(f"transparent huge pages: unavailable ({thp.get('why', 'not readable')})")
    return lines


def _num(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _bytes(n: int | None) -> str:
    if not n:
        return "?"
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return f"{n}B"
