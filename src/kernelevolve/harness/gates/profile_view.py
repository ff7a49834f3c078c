"""Per-case profiles of a result, checked on arrival and written as lines for a prompt.

The measure job's profiles (harness/worker/proc_profile.py) are read from outside the candidate's
process by the coordinator; the driver still takes only known keys with finite numbers or short
strings from them, like every other field a worker sends. `profile_lines(result)` is what the
prompt builder shows the LLM, e.g.

    case 512x2048: candidate CPU 0.43 ms/call (user 0.41 + sys 0.02) (reference 0.56 = 0.55 +
    0.01), 1 minor faults/call (reference 256), 0 major, 0.02 voluntary + 0 involuntary ctx
    switches/call (reference 1.1 + 0), 2 threads; perf: not permitted (perf_event_paranoid=4)

The user/sys split comes from scheduler ticks (`split_sampled_ms` says over how much CPU time),
the total from the precise clock.
"""
from __future__ import annotations

import math
from typing import Any

_NUMBERS = ("calls", "batches", "threads", "cpu_ms_per_call", "user_ms_per_call",
            "sys_ms_per_call", "split_sampled_ms", "minor_faults_per_call", "major_faults_per_call",
            "vol_ctx_per_call", "invol_ctx_per_call")
_TEXTS = ("observed", "perf_unavailable", "unavailable")
_PERF = ("cycles_per_call", "instructions_per_call", "cache_misses_per_call",
         "branch_misses_per_call", "ipc")
_NCU = ("dram_throughput_pct", "sm_throughput_pct", "achieved_occupancy_pct")
_KERNEL = (("name", str), ("calls", int), ("total_us", float), ("mean_us", float))
_TEXT_MAX = 400


def _number(value: Any) -> float | int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) and abs(value) < 1e18 else None


def _text(value: Any) -> str | None:
    return value[:_TEXT_MAX] if isinstance(value, str) else None


def _numbers(data: Any, keys: tuple[str, ...]) -> dict[str, Any]:
    data = data if isinstance(data, dict) else {}
    return {k: _number(data.get(k)) for k in keys if k in data}


def clean_profile(data: Any) -> dict[str, Any] | None:
    """Only known keys, finite numbers, short strings; None for anything else."""
    if not isinstance(data, dict):
        return None
    out: dict[str, Any] = _numbers(data, _NUMBERS)
    for key in _TEXTS:
        if _text(data.get(key)) is not None:
            out[key] = _text(data[key])
    if isinstance(data.get("perf"), dict):
        out["perf"] = _numbers(data["perf"], _PERF)
    if data.get("self_reported") is True:
        out["self_reported"] = True
    kernels = data.get("gpu_kernels")
    if isinstance(kernels, list):
        out["gpu_kernels"] = [
            {k: (str(row[k])[:200] if t is str else _number(row.get(k))) for k, t in _KERNEL}
            for row in kernels[:10] if isinstance(row, dict) and isinstance(row.get("name"), str)]
    ncu = data.get("ncu")
    if isinstance(ncu, dict):
        out["ncu"] = ({"unavailable": _text(ncu["unavailable"])} if _text(ncu.get("unavailable"))
                      else _numbers(ncu, _NCU))
    return out or None


def apply_profiles(result, case_result, data: dict[str, Any]) -> None:
    """A measure job's case data -> CaseResult.profile / ref_profile; why there is none goes to
    result.integrity["profile_unavailable"]."""
    profiles = data.get("profile") if isinstance(data.get("profile"), dict) else {}
    case_result.profile = clean_profile(profiles.get("candidate"))
    case_result.ref_profile = clean_profile(profiles.get("reference"))
    why = _text(data.get("profile_unavailable"))
    if why and case_result.profile is None:
        result.integrity["profile_unavailable"] = why


# ---- lines for a prompt ---------------------------------------------------------------------
def _n(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "?"
    a = abs(value)
    if a >= 1e6:
        return f"{value / 1e6:.3g}M"
    if a >= 1e4:
        return f"{value / 1e3:.3g}k"
    if a >= 100:
        return f"{value:.0f}"
    if a and a < 0.01:
        return f"{value:.1g}"
    return f"{value:.3g}"


def _perf_text(prof: dict[str, Any], ref: dict[str, Any] | None) -> str:
    perf = prof.get("perf")
    if not isinstance(perf, dict):
        why = prof.get("perf_unavailable") or "not measured"
        return "perf: " + why.removeprefix("perf: ")
    parts = [f"{_n(perf.get('cycles_per_call'))} cycles",
             f"{_n(perf.get('instructions_per_call'))} instructions"
             + (f" (IPC {_n(perf['ipc'])})" if perf.get("ipc") is not None else ""),
             f"{_n(perf.get('cache_misses_per_call'))} cache misses",
             f"{_n(perf.get('branch_misses_per_call'))} branch misses per call"]
    text = "perf: " + ", ".join(parts)
    ref_perf = (ref or {}).get("perf")
    if isinstance(ref_perf, dict):
        text += (f" (reference {_n(ref_perf.get('cycles_per_call'))} cycles, IPC "
                 f"{_n(ref_perf.get('ipc'))}, {_n(ref_perf.get('cache_misses_per_call'))} "
                 "cache misses)")
    return text


def _gpu_text(prof: dict[str, Any]) -> list[str]:
    out = [f"device kernels: {prof['unavailable']}"] if prof.get("unavailable") else []
    kernels = prof.get("gpu_kernels")
    if kernels:
        who = " (self-reported by the candidate's process)" if prof.get("self_reported") else ""
        rows = ", ".join(f"{k['name'][:60]} {_n(k.get('total_us'))} us total / "
                         f"{_n(k.get('calls'))} calls" for k in kernels[:10])
        out.append(f"device kernels{who}: {rows}")
    ncu = prof.get("ncu")
    if isinstance(ncu, dict):
        if ncu.get("unavailable"):
            out.append("ncu: " + ncu["unavailable"].removeprefix("ncu: "))
        else:
            out.append(f"ncu: dram {_n(ncu.get('dram_throughput_pct'))}% of peak, sm "
                       f"{_n(ncu.get('sm_throughput_pct'))}%, achieved occupancy "
                       f"{_n(ncu.get('achieved_occupancy_pct'))}%")
    return out


def case_line(name: str, prof: dict[str, Any], ref: dict[str, Any] | None) -> str:
    if "user_ms_per_call" not in prof:
        gpu = _gpu_text(prof)
        if gpu:
            return f"case {name}: " + "; ".join(gpu)
        return f"case {name}: profile not available: {prof.get('unavailable') or 'unknown'}"
    ref = ref if isinstance(ref, dict) and "user_ms_per_call" in ref else None

    def vs(text: str, ref_text: str) -> str:
        return f"{text} (reference {ref_text})" if ref else text

    g = prof.get
    parts = [vs(f"candidate CPU {_n(g('cpu_ms_per_call'))} ms/call (user "
                f"{_n(g('user_ms_per_call'))} + sys {_n(g('sys_ms_per_call'))})",
                ref and f"{_n(ref.get('cpu_ms_per_call'))} = {_n(ref['user_ms_per_call'])} + "
                        f"{_n(ref.get('sys_ms_per_call'))}"),
             vs(f"{_n(g('minor_faults_per_call'))} minor faults/call",
                ref and _n(ref.get("minor_faults_per_call"))),
             f"{_n(g('major_faults_per_call'))} major",
             vs(f"{_n(g('vol_ctx_per_call'))} voluntary + {_n(g('invol_ctx_per_call'))} "
                "involuntary ctx switches/call",
                ref and f"{_n(ref.get('vol_ctx_per_call'))} + {_n(ref.get('invol_ctx_per_call'))}"),
             f"{_n(g('threads'))} threads"]
    return f"case {name}: " + ", ".join(parts) + "; " + _perf_text(prof, ref)


def profile_lines(result: Any) -> list[str]:
    """Compact per-case profile lines for the LLM prompt, from an EvalResult or its to_dict().
    One line "profile: not available: <why>" when no case has a profile."""
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result or {})
    cases = [c for c in data.get("cases") or [] if isinstance(c, dict) and not c.get("held_out")]
    lines = [case_line(str(c.get("name")), c["profile"], c.get("ref_profile"))
             for c in cases if isinstance(c.get("profile"), dict)]
    if lines:
        return lines
    why = (data.get("integrity") or {}).get("profile_unavailable")
    if not why:
        if not data.get("measured"):
            why = (f"the candidate was not timed (stage {data.get('stage')}: "
                   f"{str(data.get('reason') or '').splitlines()[0][:200] if data.get('reason') else 'no reason'})"
                   if data.get("stage") != "accepted" else "this platform does not time it")
        else:
            why = "this result carries no profile"
    return [f"profile: not available: {why}"]
