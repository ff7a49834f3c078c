"""Profiles of the candidate's process read from outside it (harness/worker/proc_profile.py), their
place in the result, the GPU helpers' parsing (harness/worker/gpu_profile.py) and the prompt's lines
(harness/gates/profile_view.py). Real evaluations, real subprocesses; no timed assertions."""
from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import PROBLEMS, run_cli
from kernelevolve.harness.worker import gpu_profile, proc_profile
from kernelevolve.harness.gates.profile_view import clean_profile, profile_lines
from kernelevolve.types import CaseResult, EvalResult

RELU = PROBLEMS / "kb_level1_relu.py"
REUSE = PROBLEMS / "kb_level1_relu_cpp.py"
HERE = Path(__file__).resolve().parent / "profile_candidates"
FRESH, LIAR = HERE / "relu_fresh_pages.py", HERE / "relu_liar.py"
FIGURES = ("cpu_ms_per_call", "user_ms_per_call", "sys_ms_per_call", "minor_faults_per_call",
           "major_faults_per_call", "vol_ctx_per_call", "invol_ctx_per_call")


@pytest.fixture(scope="module")
def evals(tmp_path_factory, evaluator):
    """A relu that touches 8 MB of fresh pages every call, through a real `kernelevolve eval
    --profile --json` (the flag's lines, the JSON file), and beside it, in-process on the
    session's evaluator, a relu that reuses its memory, as the same JSON (`to_dict`, what the
    CLI writes): one CLI process, where two proved nothing more."""
    path = tmp_path_factory.mktemp("profile") / "fresh.json"
    with ThreadPoolExecutor(1) as pool:
        fresh = pool.submit(run_cli, "eval", str(RELU), str(FRESH), "--seed", "1", "--profile",
                            "--json", str(path), "--timing-cap", "0.3")
        reused = evaluator.evaluate(RELU, REUSE, options=replace(evaluator.options, seed=1))
        proc = fresh.result()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert reused.accepted, reused.reason
    return {"fresh": (proc, json.loads(path.read_text())),
            "reuse": (None, json.loads(json.dumps(reused.to_dict())))}


def _whole_count(value: float) -> bool:
    return value >= 0 and abs(value - round(value)) < 1e-6


def _timed_case(data: dict) -> dict:
    return next(c for c in data["cases"] if not c["held_out"])


@pytest.mark.slow
def test_eval_json_has_sane_profiles_of_both_processes(evals):
    _, data = evals["reuse"]
    case = _timed_case(data)
    for prof in (case["profile"], case["ref_profile"]):
        for key in FIGURES:
            assert prof[key] >= 0, (key, prof)
            if "faults" in key or "ctx" in key:  # counted over the profiled calls
                assert _whole_count(prof[key] * prof["calls"]), (key, prof)
        assert prof["cpu_ms_per_call"] > 0
        assert prof["user_ms_per_call"] + prof["sys_ms_per_call"] == \
            pytest.approx(prof["cpu_ms_per_call"])
        assert prof["calls"] == prof["batches"] * data["integrity"]["outside"][
            case["name"]]["calls_per_batch"]
        assert prof["threads"] >= 1
        assert prof["observed"].startswith("from outside")
        assert ("perf" in prof) != ("perf_unavailable" in prof)
    # Held-out cases are checked, never timed: no profile.
    assert all(c["profile"] is None for c in data["cases"] if c["held_out"])
    # Profiled batches are timed batches: within what the outside accounting saw in all of them.
    cpu = data["integrity"]["outside"][case["name"]]["cpu"]
    prof = case["profile"]
    assert prof["cpu_ms_per_call"] * prof["calls"] <= 1e3 * cpu["cand_batches_cpu_s"] * 1.0001
    # The JSON contract round-trips.
    again = EvalResult.from_dict(data).to_dict()
    assert again["cases"] == data["cases"]


def test_fresh_pages_every_call_show_many_more_minor_faults(evals):
    reuse = _timed_case(evals["reuse"][1])
    fresh = _timed_case(evals["fresh"][1])
    ratio_floor = 10
    assert fresh["profile"]["minor_faults_per_call"] > \
        ratio_floor * (reuse["profile"]["minor_faults_per_call"] + 1)
    assert fresh["profile"]["minor_faults_per_call"] > \
        ratio_floor * (fresh["ref_profile"]["minor_faults_per_call"] + 1)


def test_profile_flag_prints_the_prompt_lines(evals):
    proc, data = evals["fresh"]
    lines = profile_lines(data)
    assert len(lines) == 1 and lines[0].startswith("case default: candidate CPU ")
    assert "minor faults/call (reference " in lines[0] and "; perf: " in lines[0]
    flat = " ".join(proc.stdout.split())
    assert " ".join(lines[0].split()) in flat
    print("\n".join(lines))


def test_perf_gives_counters_or_says_why(evals):
    prof = _timed_case(evals["reuse"][1])["profile"]
    if "perf" in prof:
        assert prof["perf"]["instructions_per_call"] > 0
        assert prof["perf"]["cycles_per_call"] > 0
    else:
        assert prof["perf_unavailable"].startswith("perf: ")
    ref = _timed_case(evals["reuse"][1])["ref_profile"]
    assert "not dumpable" in ref["perf_unavailable"]


def test_a_candidate_lying_about_itself_changes_nothing(evaluator):
    """relu_liar.py renames its thread to shift /proc/<pid>/stat's fields and fakes getrusage
    and os.times (static rules off, so its ctypes and patches run): the profile, read by the
    coordinator from the kernel's records, still shows its real page faults and CPU."""
    options = replace(evaluator.options, static_rules=False)
    result = evaluator.evaluate(RELU, LIAR, options=options)
    assert result.accepted, result.reason
    case = next(c for c in result.cases if not c.held_out)
    prof = case.profile
    # ~2048 real faults a call (8 MB written, then given back); the name would make a naive
    # parser read 9s, and the fakes say 0.
    assert prof["minor_faults_per_call"] > 10 * (case.ref_profile["minor_faults_per_call"] + 1)
    assert prof["minor_faults_per_call"] < 1e5
    assert prof["cpu_ms_per_call"] > 0
    assert prof["observed"].startswith("from outside")


# ---- the readers, on a real process -------------------------------------------------------
_CHILD = r"""
import ctypes, mmap, sys
ctypes.CDLL(None).prctl(15, b") R 9 9 9 9 9 9", 0, 0, 0)
for line in sys.stdin:
    m = mmap.mmap(-1, 4 << 20)
    for i in range(0, 4 << 20, 4096):
        m[i] = 1
    m.close()
    sys.stdout.write("ok\n"); sys.stdout.flush()
"""


def _child():
    return subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def _call(child, times: int = 1) -> None:
    for _ in range(times):
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "ok\n"


def test_process_profile_reads_a_renamed_process_correctly():
    child = _child()
    try:
        _call(child)  # warm: imports done, first mapping made
        prof = proc_profile.ProcessProfile(child.pid, "perf: not asked for in this test")
        for _ in range(3):
            prof.before()
            _call(child, 2)
            prof.after(2)
        out = prof.result()
        prof.close()
    finally:
        child.stdin.close()
        child.wait()
    assert out["calls"] == 6 and out["batches"] == 3
    # 1024 pages touched a call; a stat parser fooled by the name would read 9s
    assert 900 <= out["minor_faults_per_call"] < 1e5
    assert out["cpu_ms_per_call"] > 0
    for key in ("vol_ctx_per_call", "invol_ctx_per_call", "major_faults_per_call"):
        assert _whole_count(out[key] * out["calls"]), (key, out)  # counts, not rates or deltas
    assert out["perf_unavailable"] == "perf: not asked for in this test"


def test_stat_and_status_parsers_take_fields_after_the_name():
    line = b"123 (x) R 9 9 9 9 9 9) S 1 2 3 4 5 6 77 0 88 0 10 20 0 0 20 0 1 0\n"
    assert proc_profile.parse_stat(line) == (77, 88)
    assert proc_profile.parse_stat(b"garbage") is None
    status = (b"Name:\tvoluntary_ctxt\nState:\tS\nvoluntary_ctxt_switches:\t12\n"
              b"nonvoluntary_ctxt_switches:\t3\n")
    assert proc_profile.parse_switches(status) == (12, 3)
    assert proc_profile.parse_switches(b"Name:\tx\n") is None


def test_perf_counters_attach_from_outside_or_say_why():
    """Hardware counters where the machine has them; a software event shows the mechanism
    (opened here, on another process's threads, enabled around its work) everywhere perf is
    permitted."""
    child = _child()
    try:
        _call(child)
        hw = proc_profile.PerfCounters(child.pid)
        if hw.reason:
            assert hw.reason.startswith("perf: ")
        else:
            hw.enable()
            _call(child)
            hw.disable()
            assert hw.totals()["instructions"] > 0
        hw.close()
        sw = proc_profile.PerfCounters(child.pid, events=[("page_faults", 1, 2)],
                                       kind="software")
        if sw.reason:
            pytest.skip(sw.reason)
        _call(child)  # disabled: not counted
        assert sw.totals()["page_faults"] == 0
        sw.enable()
        _call(child, 2)
        sw.disable()
        assert sw.totals()["page_faults"] >= 2 * 900
        sw.close()
    finally:
        child.stdin.close()
        child.wait()


# ---- GPU helpers, exercised on CPU ---------------------------------------------------------
NCU_CSV = '''==PROF== Connected to process 4242 (/usr/bin/python3)
==PROF== Profiling "relu_kernel" - 0: 0%....50%....100% - 9 passes
==PROF== Profiling "relu_kernel" - 1: 0%....50%....100% - 9 passes
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3","127.0.0.1","relu_kernel(float const*, float*, long)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","81.52"
"0","4242","python3","127.0.0.1","relu_kernel(float const*, float*, long)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","22.10"
"0","4242","python3","127.0.0.1","relu_kernel(float const*, float*, long)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","1,064.00"
"1","4242","python3","127.0.0.1","relu_kernel(float const*, float*, long)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","78.48"
"1","4242","python3","127.0.0.1","relu_kernel(float const*, float*, long)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__throughput.avg.pct_of_peak_sustained_elapsed","%","23.90"
"1","4242","python3","127.0.0.1","relu_kernel(float const*, float*, long)","1","7","(256, 1, 1)","(4096, 1, 1)","0","9.0","Command line profiler metrics","sm__warps_active.avg.pct_of_peak_sustained_active","%","n/a"
'''


def test_ncu_csv_is_parsed_into_our_keys():
    got = gpu_profile.parse_ncu_csv(NCU_CSV)
    assert got["kernels"] == 2
    assert got["dram_throughput_pct"] == pytest.approx(80.0)
    assert got["sm_throughput_pct"] == pytest.approx(23.0)
    assert got["achieved_occupancy_pct"] == pytest.approx(1064.0)  # "n/a" skipped, "1,064" read
    assert "unavailable" in gpu_profile.parse_ncu_csv("==PROF== nothing profiled\n")
    clean = clean_profile({"ncu": got, "self_reported": True})
    assert clean["ncu"]["dram_throughput_pct"] == pytest.approx(80.0)


def test_ncu_says_why_when_absent(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no ncu on it
    assert gpu_profile.ncu_metrics(["true"]) == {"unavailable": "ncu: not on PATH"}


@pytest.mark.slow
def test_kernel_table_from_real_profiler_events_on_cpu():
    import torch

    x = torch.randn(64, 64)
    out = gpu_profile.profile_call(lambda a: torch.relu(a @ a) + 1, [x], lambda: None,
                                   kinds=("cpu",), calls=3)
    rows = out["gpu_kernels"]
    assert 0 < len(rows) <= gpu_profile.TOP
    names = [r["name"] for r in rows]
    assert "aten::relu" in names and "aten::matmul" in names
    relu = rows[names.index("aten::relu")]
    assert relu["calls"] == 3 and relu["total_us"] > 0  # three relus of 64x64 take time
    assert relu["mean_us"] == pytest.approx(relu["total_us"] / 3)
    assert [r["total_us"] for r in rows] == sorted((r["total_us"] for r in rows), reverse=True)
    # As the in-process GPU path stores it, and as the prompt shows it.
    prof = clean_profile({**out, "self_reported": True,
                          "ncu": {"unavailable": gpu_profile.NCU_IN_JOB}})
    line = profile_lines({"cases": [{"name": "n64", "held_out": False, "profile": prof}],
                          "measured": True})[0]
    assert line.startswith("case n64: device kernels (self-reported by the candidate's process)")
    assert "aten::relu" in line and "ncu: not run on candidates" in line


# ---- the result contract and the prompt's lines --------------------------------------------
def test_profile_fields_default_to_none_and_round_trip():
    old = EvalResult(accepted=True, stage="accepted", reason="ok",
                     cases=[CaseResult("a", 1.0)]).to_dict()
    del old["cases"][0]["profile"], old["cases"][0]["ref_profile"]  # a result from before
    back = EvalResult.from_dict(old)
    assert back.cases[0].profile is None and back.cases[0].ref_profile is None
    prof = {"calls": 10, "cpu_ms_per_call": 0.5, "perf_unavailable": "perf: x"}
    res = EvalResult(accepted=True, stage="accepted", reason="ok",
                     cases=[CaseResult("a", 1.0, profile=prof, ref_profile=dict(prof))])
    assert EvalResult.from_dict(res.to_dict()).to_dict() == res.to_dict()


def test_profile_lines_say_why_when_nothing_was_measured():
    rejected = EvalResult(accepted=False, stage="correctness", reason="wrong result on case 'a'",
                          cases=[CaseResult("a", 1.0)])
    assert profile_lines(rejected) == [
        "profile: not available: the candidate was not timed (stage correctness: wrong result "
        "on case 'a')"]
    inprocess = EvalResult(accepted=True, stage="accepted", reason="ok", measured=True,
                           integrity={"profile_unavailable": "in-process timing: x"},
                           cases=[CaseResult("a", 1.0)])
    assert profile_lines(inprocess) == ["profile: not available: in-process timing: x"]


def test_clean_profile_keeps_only_known_finite_fields():
    got = clean_profile({"cpu_ms_per_call": float("nan"), "minor_faults_per_call": 3,
                         "evil": "x" * 10, "perf": {"ipc": True, "cycles_per_call": 5.0},
                         "perf_unavailable": "p" * 5000})
    assert got == {"cpu_ms_per_call": None, "minor_faults_per_call": 3,
                   "perf": {"ipc": None, "cycles_per_call": 5.0}, "perf_unavailable": "p" * 400}
    assert clean_profile("not a dict") is None
