"""`kernelevolve bench`: a folder of problems as one campaign: rows, skips, failures, fast_p,
and a kill (SIGTERM) in the middle of the second problem that the same command resumes."""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import PROBLEMS, run_cli
from kernelevolve.bench.metrics import compile_factor, fast_p, summary

HUGE = '''import torch
import torch.nn as nn
N = 200000
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    return [torch.randn(N, N)]
def get_init_inputs():
    return []
'''


@pytest.fixture
def suite(tmp_path):
    folder = tmp_path / "suite"
    folder.mkdir()
    for name in ("a_relu", "b_relu"):
        shutil.copy(PROBLEMS / "kb_level1_relu.py", folder / f"{name}.py")
    return folder


def _state(ws):
    found = list((ws / "benches").glob("*.json"))
    return json.loads(found[0].read_text()) if found else None


@pytest.mark.slow
def test_bench_rows_skip_fail_and_figures(suite, tmp_path):
    (suite / "b_relu.py").unlink()
    (suite / "c_huge.py").write_text(HUGE)
    (suite / "d_broken.py").write_text("import torch\n")
    (suite / "_helper.py").write_text("raise SystemExit('not a problem')\n")
    out = run_cli("bench", str(suite), "--workspace", str(tmp_path / "ws"), "--max-evals", "1",
                  "--no-compile", "--json", str(tmp_path / "b.json"))
    assert out.returncode == 0, out.stderr
    data = json.loads((tmp_path / "b.json").read_text())
    rows = {r["problem"]: r for r in data["rows"]}
    assert sorted(rows) == ["a_relu", "c_huge", "d_broken"]
    assert rows["a_relu"]["status"] == "done" and rows["a_relu"]["correct"]
    assert rows["a_relu"]["evals"] == 1 and rows["a_relu"]["run_id"].startswith("r")
    assert rows["c_huge"]["status"] == "skipped"
    assert rows["c_huge"]["reason"].startswith("needs about 596.0 GiB (case default: 149.01 GiB")
    assert rows["d_broken"]["status"] == "failed" and "defines no `Model`" in rows["d_broken"][
        "reason"]
    s = data["summary"]
    assert (s["problems"], s["done"], s["skipped"], s["failed"]) == (3, 1, 1, 1)
    assert s["over_eager"]["fast_0"] == s["correct_rate"] == pytest.approx(1 / 3)
    assert s["funnel"]["accepted"] == 1
    assert "over torch.compile: fast_0 33%" in out.stdout and "fast_1" in out.stdout
    assert (tmp_path / "ws" / "benches").is_dir() and list((tmp_path / "ws" / "benches").glob(
        "*.html"))


@pytest.mark.slow
def test_bench_is_killed_mid_problem_and_resumes(suite, tmp_path):
    ws = tmp_path / "ws"
    cmd = [sys.executable, "-m", "kernelevolve.cli", "bench", str(suite), "--workspace", str(ws),
           "--max-evals", "1", "--no-compile"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    state = None
    while time.monotonic() < deadline:
        state = _state(ws)
        if state and state["rows"][0]["status"] == "done" and state["rows"][1].get("run_id"):
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    time.sleep(0.5)  # into the second problem's run
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err
    assert "run the same command to resume" in err
    state = _state(ws)
    first, second = state["rows"]
    assert first["status"] == "done" and second["status"] == "running"
    from kernelevolve.store import Store

    with Store.open(ws) as store:
        assert store.get_run(second["run_id"]).status in ("interrupted", "completed")
        evals_first = store.eval_count(first["run_id"])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    assert "resuming bench" in out.stderr and "1 of 2 problems finished" in out.stderr
    again = _state(ws)
    assert [r["status"] for r in again["rows"]] == ["done", "done"]
    assert again["rows"][0]["run_id"] == first["run_id"]
    assert again["rows"][1]["run_id"] == second["run_id"]  # resumed, not started over
    with Store.open(ws) as store:
        assert store.eval_count(first["run_id"]) == evals_first
        assert len(store.list_runs()) == 2


@pytest.mark.slow
def test_bench_refuses_a_name_holding_other_problems(suite, tmp_path):
    ws = tmp_path / "ws"
    (ws / "benches").mkdir(parents=True)
    (ws / "benches" / "mine.json").write_text(json.dumps(
        {"name": "mine", "rows": [{"path": "/elsewhere/x.py"}], "settings": {}}))
    out = run_cli("bench", str(suite), "--workspace", str(ws), "--name", "mine")
    assert out.returncode == 2 and "bench mine holds other problems" in out.stderr
    out = run_cli("bench", str(tmp_path / "nothing"), "--workspace", str(ws))
    assert out.returncode == 2 and "no such problem file or folder" in out.stderr


def test_fast_p_counts_only_safe_wins_and_compile_divides_paired_ratios():
    rows = [{"status": "done", "correct": True, "safe": True, "speedup": 2.5,
             "speedup_compile": 1.2},
            {"status": "done", "correct": True, "safe": False, "speedup": None,
             "measured_speedup": 1.4},
            {"status": "done", "correct": False},
            {"status": "skipped"}]
    assert fast_p(rows, "speedup") == {"fast_0": 0.5, "fast_1": 0.25, "fast_1.5": 0.25,
                                       "fast_2": 0.25}
    assert fast_p(rows, "speedup_compile")["fast_1.5"] == 0.0
    s = summary(rows)
    assert (s["correct_rate"], s["improved_share"], s["no_improvement_share"]) == (0.5, 0.25, 0.5)
    results = [{"cases": [{"ref_ms": 2.0, "cand_ms": 1.0}]},  # no compile timing: skipped
               {"cases": [{"weight": 3.0, "ref_ms": 4.0, "compile_ms": 2.0},
                          {"weight": 1.0, "ref_ms": 1.0, "compile_ms": 1.0},
                          {"held_out": True, "ref_ms": 1.0, "compile_ms": 9.0}]}]
    assert compile_factor(results) == pytest.approx(2.0 ** 0.75)
