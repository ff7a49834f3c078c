"""Measured machine facts (platforms/machine_facts.py) and speed of light (harness/protocol/roofline.py):
real sandboxed workers, a real cache file, real torch counting, the real CLI."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

from conftest import PROBLEMS, run_cli
from kernelevolve import knobs
from kernelevolve.harness.protocol.roofline import apply_roofline, reference_cost, sol_text
from kernelevolve.platforms import machine_facts
from kernelevolve.search.termination import Budgets, Progress, should_stop
from kernelevolve.types import CaseResult, EvalResult

RELU = PROBLEMS / "kb_level1_relu.py"
RELU_CPP = PROBLEMS / "kb_level1_relu_cpp.py"


# ---- static facts --------------------------------------------------------------------------
def test_static_facts_of_this_machine():
    facts = machine_facts.static_facts()
    assert facts["cores"]["logical"] == os.cpu_count()
    assert facts["cores"]["physical"] is None or 1 <= facts["cores"]["physical"] <= os.cpu_count()
    if Path("/sys/devices/system/cpu/cpu0/cache").is_dir():
        names = [c["name"] for c in facts["caches"]]
        assert "L1d" in names, names
        assert all(c["bytes"] and c["bytes"] > 0 for c in facts["caches"])
    thp = facts["thp"]
    assert thp["enabled"] in ("always", "madvise", "never") or thp.get("why")


def test_page_policy_and_caches_parsed_from_files(tmp_path):
    thp = tmp_path / "thp"
    thp.mkdir()
    (thp / "enabled").write_text("always [madvise] never\n")
    (thp / "defrag").write_text("always defer defer+madvise [madvise] never\n")
    assert machine_facts.huge_page_policy(str(thp)) == {"enabled": "madvise", "defrag": "madvise"}
    missing = machine_facts.huge_page_policy(str(tmp_path / "absent"))
    assert missing["enabled"] is None and "absent/enabled" in missing["why"]
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"),
                                             (2, "Unified", "2048K"), (3, "Unified", "266240K")]):
        d = tmp_path / "cache" / f"index{i}"
        d.mkdir(parents=True)
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    caches = machine_facts.cache_sizes(str(tmp_path / "cache"))
    assert [(c["name"], c["size"]) for c in caches] == [("L1d", "48K"), ("L1i", "32K"),
                                                        ("L2", "2M"), ("L3", "260M")]
    assert machine_facts.last_level_bytes(caches) == 266240 << 10


def test_machine_lines_render_cpu_and_gpu_facts():
    fp = {"machine": {
        "gpu": {"name": "NVIDIA H200", "sms": 132, "memory_bytes": 150 << 30,
                "l2_bytes": 60 << 20, "clock_khz": 1980000, "capability": "9.0"},
        "memory_bandwidth": {"gbs": 12.34, "kernel": "copy", "threads": 2},
        "peak_gflops": {"float32": {"gflops": 95.2, "how": "torch.mm 1024^3"}},
        "peak_skipped": {"bfloat16": "no avx512_bf16/amx_bf16 in the CPU flags"},
        "caches": [{"name": "L1d", "size": "32K"}, {"name": "L2", "size": "1M"}],
        "cores": {"physical": 2, "logical": 4}, "thp": {"enabled": "madvise",
                                                        "defrag": "never"}}}
    lines = machine_facts.machine_lines(fp)
    assert lines == [
        "GPU NVIDIA H200: 132 SMs, 150G memory, L2 60M, 1.98 GHz, capability 9.0",
        "memory bandwidth 12.3 GB/s (copy, 2 threads)",
        "peak fp32 95.2 GFLOP/s (torch.mm 1024^3)",
        "peak bf16 not measured: no avx512_bf16/amx_bf16 in the CPU flags",
        "caches L1d 32K, L2 1M",
        "cores 2 physical/4 logical",
        "transparent huge pages: madvise (defrag never)"]
    assert machine_facts.machine_lines({}) == []
    gone = machine_facts.machine_lines({"machine": {"thp": {"enabled": None, "why": "x: gone"}}})
    assert gone == ["transparent huge pages: unavailable (x: gone)"]


# ---- measured in the worker, cached by the driver -------------------------------------------
@pytest.mark.slow
def test_fingerprint_measures_once_then_reads_the_cache(tmp_path):
    from kernelevolve.harness.driver.pool import WorkerPool

    with knobs.override(KERNELEVOLVE_CACHE_DIR=str(tmp_path)):
        with WorkerPool("cpu") as pool:
            first = pool.fingerprint()
            assert pool.machine_measurements == 1
        m = first["machine"]
        assert m["memory_bandwidth"]["gbs"] > 0 and m["memory_bandwidth"]["threads"] >= 1
        assert m["peak_gflops"]["float32"]["gflops"] > 0
        assert m["cached"] is False and m["caches"] and m["cores"]["logical"] >= 1
        files = list((tmp_path / "machines").glob("*.json"))
        assert [f.name for f in files] == [f"{machine_facts.cache_key(first)}.json"]
        stored = json.loads(files[0].read_text())
        assert stored["memory_bandwidth"] == m["memory_bandwidth"]
        mtime = files[0].stat().st_mtime_ns

        with WorkerPool("cpu") as pool:
            second = pool.fingerprint()
            assert pool.machine_measurements == 0  # no machine job ran
        assert second["machine"]["cached"] is True
        assert second["machine"]["measured_at"] == m["measured_at"]
        assert second["machine"]["memory_bandwidth"] == m["memory_bandwidth"]
        assert files[0].stat().st_mtime_ns == mtime
        assert any(line.startswith("memory bandwidth ") for line in
                   machine_facts.machine_lines(second))


def test_cache_key_separates_machines_and_ignores_other_fields():
    base = {"platform": "cpu", "hostname": "a", "cpu_model": "x", "cpu_count": 2, "threads": 2,
            "torch": "2.13", "devices": ["x"]}
    assert machine_facts.cache_key(base) == machine_facts.cache_key({**base, "os": "other"})
    for key, value in (("hostname", "b"), ("threads", 1), ("torch", "2.11"), ("devices", ["y"])):
        assert machine_facts.cache_key(base) != machine_facts.cache_key({**base, key: value})


# ---- counting bytes and flops --------------------------------------------------------------
class _MatMul(torch.nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class _Pointwise(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2 + 1


@pytest.mark.slow
def test_matmul_cost_is_exact():
    m, k, n = 64, 48, 32
    a, b = torch.randn(m, k), torch.randn(k, n)
    model = _MatMul()
    cost = reference_cost(model, [a, b], [model(a, b)])
    assert cost == {"bytes": 4 * (m * k + k * n + m * n), "flops": 2 * m * n * k,
                    "dtype": "float32"}


def test_linear_counts_its_parameters():
    model = torch.nn.Linear(16, 8)
    x = torch.randn(4, 16)
    cost = reference_cost(model, [x], [model(x)])
    assert cost["flops"] == 2 * 4 * 16 * 8
    assert cost["bytes"] == 4 * (4 * 16 + 16 * 8 + 8 + 4 * 8)


def test_pointwise_cost_is_memory_bound():
    x = torch.randn(1000).to(torch.bfloat16)
    model = _Pointwise()
    cost = reference_cost(model, [x], [model(x)])
    assert cost == {"bytes": 2 * 2 * 1000, "flops": 0, "dtype": "bfloat16"}
    result = EvalResult(accepted=True, stage="accepted", reason="", measured=True,
                        cases=[CaseResult("c", 1.0, cand_ms=0.004)])
    fp = {"machine": {"memory_bandwidth": {"gbs": 10.0},
                      "peak_gflops": {"float32": {"gflops": 100.0}}}}
    apply_roofline(result, {"c": cost}, fp)
    case = result.cases[0]
    assert case.sol_bound == "memory" and case.flops == 0
    assert case.sol_ms == pytest.approx(4000 / 10e9 * 1e3)
    assert case.sol_fraction == pytest.approx(case.sol_ms / 0.004)
    assert case.achieved_gbs == pytest.approx(4000 / 0.004e-3 / 1e9)


def test_roofline_compute_bound_and_weighted_fraction():
    cases = [CaseResult("mm", 3.0, cand_ms=2.0), CaseResult("add", 1.0, cand_ms=1.0),
             CaseResult("held", 0.0, held_out=True)]
    result = EvalResult(accepted=True, stage="accepted", reason="", measured=True, cases=cases)
    costs = {"mm": {"bytes": 1_000_000, "flops": 100_000_000, "dtype": "float16"},
             "add": {"bytes": 5_000_000, "flops": 0, "dtype": "float32"},
             "held": {"bytes": 10, "flops": 0, "dtype": "float32"}}
    fp = {"machine": {"memory_bandwidth": {"gbs": 10.0},
                      "peak_gflops": {"float32": {"gflops": 100.0},
                                      "float16": {"gflops": 200.0}}}}
    apply_roofline(result, costs, fp)
    mm, add, held = result.cases
    assert mm.sol_bound == "compute" and mm.sol_ms == pytest.approx(0.5)  # 1e8 / 200e9 s
    assert mm.sol_fraction == pytest.approx(0.25)
    assert mm.achieved_gflops == pytest.approx(50.0)
    assert add.sol_bound == "memory" and add.sol_fraction == pytest.approx(0.5)
    assert held.bytes_moved == 10 and held.sol_fraction is None  # not timed
    assert result.sol_fraction == pytest.approx((0.25 ** 3 * 0.5) ** 0.25)
    assert sol_text(mm) == "25% comp" and sol_text(add.__dict__) == "50% mem"
    assert sol_text(held) == "-"
    back = EvalResult.from_dict(json.loads(json.dumps(result.to_dict())))
    assert back.cases[0] == mm and back.sol_fraction == result.sol_fraction


def test_no_machine_figures_leaves_only_the_counts():
    result = EvalResult(accepted=True, stage="accepted", reason="", measured=True,
                        cases=[CaseResult("c", 1.0, cand_ms=1.0)])
    apply_roofline(result, {"c": {"bytes": 8, "flops": 0, "dtype": "float32"}}, {})
    assert result.cases[0].bytes_moved == 8 and result.cases[0].sol_fraction is None
    assert result.sol_fraction is None


# ---- through the real CLI --------------------------------------------------------------------
@pytest.mark.slow
def test_eval_json_and_table_carry_the_speed_of_light(tmp_path):
    out = tmp_path / "r.json"
    proc = run_cli("eval", str(RELU), str(RELU_CPP), "--seed", "1", "--json", str(out),
                   "--timing-cap", "0.3")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    header = next(line for line in proc.stdout.splitlines() if "cand ms" in line)
    assert header.split()[-1] == "SOL", proc.stdout
    data = json.loads(out.read_text())
    timed = [c for c in data["cases"] if not c["held_out"]]
    assert timed
    for case in timed:
        assert case["bytes_moved"] == 2 * 4 * 16 * 16384 and case["flops"] == 0
        assert case["sol_bound"] == "memory" and case["sol_fraction"] > 0
        assert case["sol_ms"] > 0 and case["achieved_gbs"] > 0
        assert f"{100 * case['sol_fraction']:.0f}% mem" in proc.stdout
    assert data["sol_fraction"] == pytest.approx(timed[0]["sol_fraction"])
    assert data["fingerprint"]["machine"]["memory_bandwidth"]["gbs"] > 0


# ---- stop at a fraction of the speed of light ------------------------------------------------
def test_stop_at_sol_rule():
    budgets = Budgets(max_evals=None, plateau_evals=None, stop_at_sol=0.6)
    progress = Progress()
    progress.note_evaluation(1.5, 0.4)
    assert should_stop(budgets, progress) is None
    progress.note_evaluation(1.8, 0.65)
    reason = should_stop(budgets, progress)
    assert reason and reason.startswith("speed of light reached") and "65%" in reason
    progress.note_evaluation(1.8, None)  # best node not measured against the machine
    assert should_stop(budgets, progress) is None
    assert should_stop(Budgets(max_evals=None, plateau_evals=None), progress) is None


def test_stop_at_sol_from_flags_and_config_file(tmp_path):
    from kernelevolve.config import RunConfig, build_config
    from kernelevolve.errors import UsageError

    assert build_config(None, {"stop_at_sol": 0.6}).budgets.stop_at_sol == 0.6
    toml = tmp_path / "run.toml"
    toml.write_text("stop_at_sol = 0.75\n")
    config = build_config(toml, {})
    assert config.budgets.stop_at_sol == 0.75
    assert RunConfig.from_dict(config.to_dict()).budgets.stop_at_sol == 0.75
    with pytest.raises(UsageError, match="stop-at-sol"):
        build_config(None, {"stop_at_sol": 0})


@pytest.mark.slow
def test_stop_at_sol_cli_rejects_a_bad_fraction(tmp_path):
    proc = run_cli("optimize", str(RELU), "--stop-at-sol", "1.5", "--workspace",
                   str(tmp_path / "ws"))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--stop-at-sol 1.5" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "ws" / "runs").exists() or not any((tmp_path / "ws" / "runs").iterdir())


# ---- reports ---------------------------------------------------------------------------------
def test_html_and_show_text_show_machine_and_sol():
    from io import StringIO

    from rich.console import Console

    from kernelevolve.report.html import render_html
    from kernelevolve.report.runs import print_sol_cases
    from kernelevolve.report.summary import RunSummary

    case = {"name": "big", "weight": 1.0, "ref_ms": 2.0, "cand_ms": 1.0, "speedup": 2.0,
            "sol_fraction": 0.31, "sol_bound": "memory", "sol_ms": 0.31, "achieved_gbs": 5.0,
            "achieved_gflops": 0.0}
    page = render_html(RunSummary(run_id="r1", best={"node_id": 3, "speedup": 2.0},
                                  best_cases=[case], best_source="x = 1\n",
                                  machine=["memory bandwidth 12.3 GB/s (copy, 2 threads)"]))
    assert "31% mem" in page and "speed of light" in page
    assert "memory bandwidth 12.3 GB/s (copy, 2 threads)" in page
    buf = StringIO()
    print_sol_cases([case], Console(file=buf, width=200))
    assert "big: 1 ms, 2.00x, SOL 31% mem" in buf.getvalue()
