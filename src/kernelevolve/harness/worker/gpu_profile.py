"""Device profiles for GPU platforms: torch.profiler's kernel list, and Nsight Compute metrics.

Trust: on devices the candidate is timed in its own process (harness/worker/measure_inprocess.py), and
torch.profiler runs in that process too, so the kernel list is what the candidate's process
reports: native code there can rewrite the profiler's results. It is marked `self_reported` and
never feeds a verdict; it helps the LLM see which kernels ran and for how long.

Nsight Compute (`ncu`) profiles a process it launches itself; the harness runs candidate code
only inside its sandboxed worker, so `ncu_metrics(argv)` is for commands the caller trusts (a
standalone reproduction, the reference), and the measure job records why it did not run it.
Without `ncu` on PATH, every entry point says so: {"unavailable": "ncu: not on PATH"}.
"""
from __future__ import annotations

import csv
import io
import shutil
import subprocess
from typing import Any, Callable

TOP = 10
# Nsight Compute metric -> our key: memory throughput vs peak, SM throughput vs peak, and
# achieved occupancy (active warps vs the SM's maximum).
NCU_METRICS = {"dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
               "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
               "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct"}


def _device_kind(event: Any) -> str:
    return str(getattr(event, "device_type", "")).rsplit(".", 1)[-1].lower()


def kernel_table(events: Any, kinds: tuple[str, ...], top: int = TOP
                 ) -> list[dict[str, Any]]:
    """torch.profiler events (`prof.events()`) of the given device kinds, grouped by name:
    calls, total and mean time in microseconds, the `top` largest totals first. ROCm builds of
    torch report their kernels as CUDA events too."""
    groups: dict[str, list[float]] = {}
    for event in events:
        if _device_kind(event) not in kinds:
            continue
        span = getattr(event, "time_range", None)
        us = float(span.end - span.start) if span is not None else float(
            getattr(event, "device_time", 0.0) or 0.0)
        entry = groups.setdefault(str(event.name), [0, 0.0])
        entry[0] += 1
        entry[1] += max(us, 0.0)
    rows = [{"name": name, "calls": calls, "total_us": total, "mean_us": total / calls}
            for name, (calls, total) in groups.items()]
    rows.sort(key=lambda r: (-r["total_us"], r["name"]))
    return rows[:top]


def profile_call(fn: Callable[..., Any], args: list[Any], synchronize: Callable[[], None],
                 kinds: tuple[str, ...], calls: int = 1) -> dict[str, Any]:
    """Kernels of `calls` calls of fn(*args) under torch.profiler, in this process (so:
    self-reported where this process runs candidate code)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    # kinds: the platform's profile_kinds, torch's activity names in lower case
    activities = [ProfilerActivity.CPU] + [getattr(ProfilerActivity, k.upper()) for k in kinds
                                           if k != "cpu" and hasattr(ProfilerActivity, k.upper())]
    try:
        synchronize()
        with torch.no_grad(), profile(activities=activities) as prof:
            for _ in range(calls):
                fn(*args)
            synchronize()
        rows = kernel_table(prof.events(), kinds)
    except Exception as exc:  # noqa: BLE001 - a profile is advice; its failure is not a verdict
        return {"unavailable": f"torch.profiler failed: {type(exc).__name__}: {exc}"[:400]}
    if not rows:
        return {"unavailable": "torch.profiler recorded no device kernel"}
    return {"gpu_kernels": rows}


def _value(text: str) -> float | None:
    try:
        return float(text.replace(",", "").strip())
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> dict[str, Any]:
    """`ncu --csv --metrics ...` output (one row per kernel and metric, after ==PROF== lines)
    -> our keys averaged over the profiled kernels, plus `kernels` (how many)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return {"unavailable": "ncu: no metrics in its output"}
    values: dict[str, list[float]] = {}
    kernels = set()
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        key = NCU_METRICS.get((row.get("Metric Name") or "").strip())
        value = _value(row.get("Metric Value") or "")
        if key is None or value is None:
            continue
        values.setdefault(key, []).append(value)
        kernels.add((row.get("ID"), row.get("Kernel Name")))
    if not values:
        return {"unavailable": "ncu: none of the metrics asked for was reported"}
    out: dict[str, Any] = {k: sum(v) / len(v) for k, v in values.items()}
    out["kernels"] = len(kernels)
    return out


def ncu_unavailable() -> str | None:
    """Why ncu cannot run here, or None."""
    return None if shutil.which("ncu") else "ncu: not on PATH"


def ncu_metrics(argv: list[str], timeout_s: float = 600) -> dict[str, Any]:
    """Run a trusted command under Nsight Compute with NCU_METRICS; {"unavailable": why} when
    ncu is missing, refused (e.g. ERR_NVGPUCTRPERM: counters restricted to admin users) or
    reported nothing."""
    why = ncu_unavailable()
    if why:
        return {"unavailable": why}
    cmd = ["ncu", "--csv", "--metrics", ",".join(NCU_METRICS), "--target-processes", "all",
           *argv]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"unavailable": f"ncu: {type(exc).__name__}: {exc}"[:400]}
    parsed = parse_ncu_csv(proc.stdout)
    if "unavailable" in parsed:
        tail = [line for line in (proc.stderr + proc.stdout).splitlines() if "ERR" in line
                or "rror" in line]
        detail = f" (exit {proc.returncode}{': ' + tail[-1].strip() if tail else ''})"
        return {"unavailable": (parsed["unavailable"] + detail)[:400]}
    return parsed


NCU_IN_JOB = ("ncu: not run on candidates: it launches the process it profiles, and the harness "
              "runs candidate code only inside its sandboxed worker")
