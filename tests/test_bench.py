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


@pytest.fixture(scope="module")
def killed_bench(tmp_path_factory):
    """One bench over a_relu, b_relu, a problem too big to run, a broken one and a helper
    module: SIGTERM in the middle of b_relu, then the same command resumes it to the end."""
    tmp = tmp_path_factory.mktemp("bench")
    folder, ws = tmp / "suite", tmp / "ws"
    folder.mkdir()
    for name in ("a_relu", "b_relu"):
        shutil.copy(PROBLEMS / "kb_level1_relu.py", folder / f"{name}.py")
    (folder / "c_huge.py").write_text(HUGE)
    (folder / "d_broken.py").write_text("import torch\n")
    (folder / "_helper.py").write_text("raise SystemExit('not a problem')\n")
    cmd = [sys.executable, "-m", "kernelevolve.cli", "bench", str(folder), "--workspace",
           str(ws), "--max-evals", "1", "--no-compile", "--json", str(tmp / "b.json")]
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
    killed = {"rc": proc.returncode, "stderr": err, "state": _state(ws),
              "json_written": (tmp / "b.json").exists()}
    from kernelevolve.store import Store

    with Store.open(ws) as store:
        rows = killed["state"]["rows"]
        killed["second_status"] = store.get_run(rows[1]["run_id"]).status
        killed["evals_first"] = store.eval_count(rows[0]["run_id"])
    resumed = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    data = json.loads((tmp / "b.json").read_text()) if (tmp / "b.json").exists() else None
    return {"ws": ws, "killed": killed, "resumed": resumed, "data": data}


@pytest.mark.slow
def test_bench_rows_skip_fail_and_figures(killed_bench):
    out, data, ws = killed_bench["resumed"], killed_bench["data"], killed_bench["ws"]
    assert out.returncode == 0, out.stderr
    rows = {r["problem"]: r for r in data["rows"]}
    assert sorted(rows) == ["a_relu", "b_relu", "c_huge", "d_broken"]
    for name in ("a_relu", "b_relu"):
        assert rows[name]["status"] == "done" and rows[name]["correct"]
        assert rows[name]["evals"] == 1 and rows[name]["run_id"].startswith("r")
    assert rows["c_huge"]["status"] == "skipped"
    assert rows["c_huge"]["reason"].startswith("needs about 596.0 GiB (case default: 149.01 GiB")
    assert rows["d_broken"]["status"] == "failed" and "defines no `Model`" in rows["d_broken"][
        "reason"]
    s = data["summary"]
    assert (s["problems"], s["done"], s["skipped"], s["failed"]) == (4, 2, 1, 1)
    assert s["over_eager"]["fast_0"] == s["correct_rate"] == pytest.approx(2 / 4)
    assert s["funnel"]["accepted"] == 2
    assert "over torch.compile: fast_0 50%" in out.stdout and "fast_1" in out.stdout
    assert (ws / "benches").is_dir() and list((ws / "benches").glob("*.html"))


@pytest.mark.slow
def test_bench_is_killed_mid_problem_and_resumes(killed_bench):
    killed, out, ws = killed_bench["killed"], killed_bench["resumed"], killed_bench["ws"]
    assert killed["rc"] == 130, killed["stderr"]
    assert "run the same command to resume" in killed["stderr"]
    assert not killed["json_written"]  # no report of a campaign that did not finish
    first, second = killed["state"]["rows"][:2]
    assert first["status"] == "done" and second["status"] == "running"
    assert all(r["status"] == "pending" for r in killed["state"]["rows"][2:])
    assert killed["second_status"] in ("interrupted", "completed")
    assert out.returncode == 0, out.stderr
    assert "resuming bench" in out.stderr and "1 of 4 problems finished" in out.stderr
    again = _state(ws)
    assert [r["status"] for r in again["rows"]] == ["done", "done", "skipped", "failed"]
    assert again["rows"][0]["run_id"] == first["run_id"]
    assert again["rows"][1]["run_id"] == second["run_id"]  # resumed, not started over
    from kernelevolve.store import Store

    with Store.open(ws) as store:
        assert store.eval_count(first["run_id"]) == killed["evals_first"]
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
