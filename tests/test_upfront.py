"""What needs no sandbox is answered before any worker starts (upfront.py, the evaluator's lazy
pool): a static rejection in `eval`, a problem too big for the machine, a seed the static gate
refuses; no run is created for a search that cannot start; `last` skips a run that evaluated
nothing. All in-process (CliRunner), with real SQLite stores."""
from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from conftest import CORPUS, PROBLEMS
from kernelevolve.cli import app
from kernelevolve.store import Store

PROBLEM = PROBLEMS / "tunable_scale.py"
CANDIDATE = PROBLEMS / "tunable_scale_candidate.py"  # passes the static gate
BIG = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(13 * 2 ** 30)]  # 52 GiB of float32


def get_init_inputs():
    return []
'''


@pytest.fixture
def no_pool(monkeypatch):
    """Every worker pool the evaluator would start, recorded and refused."""
    import kernelevolve.harness.driver.evaluate as evaluate

    started = []

    def refuse(*args, **kwargs):
        started.append(args)
        raise AssertionError("a worker pool was started")

    monkeypatch.setattr(evaluate, "WorkerPool", refuse)
    return started


@pytest.mark.parametrize("text, reason", [
    ("class ModelNew(:\n    pass\n", "syntax error at bad.py, line 1"),
    ("import torch\n\nclass Other:\n    pass\n", "defines no `ModelNew`"),
    (None, "forbidden construct(s)")])
def test_static_rejection_starts_no_worker(no_pool, tmp_path, text, reason):
    bad = tmp_path / "bad.py"
    bad.write_text(text if text is not None else (CORPUS / "bad_subprocess.py").read_text())
    res = CliRunner().invoke(app, ["eval", str(PROBLEM), str(bad)])
    assert res.exit_code == 1, res.output
    assert res.output.count("REJECTED at static") == 1, res.output
    assert reason in res.output
    assert no_pool == []


def test_a_52_gib_problem_is_refused_with_one_line_and_no_run(no_pool, tmp_path):
    from kernelevolve.memory_estimate import available_bytes

    if (available_bytes() or 0) > 4 * 52 * 2 ** 30:
        pytest.skip("this machine has the memory for it")
    big = tmp_path / "big.py"
    big.write_text(BIG)
    ws = tmp_path / "ws"
    Store.open(ws)  # an existing workspace: it must stay without a run
    for args in (["optimize", str(big), "--workspace", str(ws)], ["eval", str(big), str(CANDIDATE)]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), res.output
        assert "too big for this machine" in lines[0] and "GiB" in lines[0]
    assert Store.open(ws).list_runs() == []
    assert no_pool == []


def test_a_seed_the_static_gate_refuses_creates_no_run(tmp_path):
    ws = tmp_path / "ws"
    bad = tmp_path / "seed.py"
    bad.write_text("class ModelNew(:\n")
    res = CliRunner().invoke(app, ["optimize", str(PROBLEM), "--seed-candidate", str(bad),
                                   "--workspace", str(ws)])
    assert res.exit_code == 2, res.output
    assert "--seed-candidate" in res.output and "rejected at the static gate: syntax error" \
        in res.output
    assert not (ws / "kernelevolve.db").exists() or Store.open(ws).list_runs() == []


def test_last_skips_a_run_that_evaluated_nothing(tmp_path):
    from kernelevolve.config import RunConfig
    from kernelevolve.run import Run
    from kernelevolve.types import EvalResult

    ws = tmp_path / "ws"
    with pytest.raises(Exception, match="no runs in"):
        Store.open(ws).get_run("last")
    done = Run.create(PROBLEM, RunConfig(), workspace=ws)
    done.store.record_evaluation(done.id, 0, EvalResult(False, "static", "no ModelNew"), 0.1)
    dead = Run.create(PROBLEM, RunConfig(), workspace=ws)  # newer, and never evaluated
    dead.store.set_run_status(dead.id, "interrupted")
    assert Store.open(ws).get_run("last").id == done.id
    runner = CliRunner()
    shown = runner.invoke(app, ["show", "last", "--workspace", str(ws)])
    assert shown.exit_code == 0 and done.id in shown.output and dead.id not in shown.output
    listed = runner.invoke(app, ["runs", "--workspace", str(ws)])
    assert f"`last` is {done.id}" in listed.output, listed.output
    promoted = runner.invoke(app, ["promote", "last", "--workspace", str(ws)])
    assert promoted.exit_code == 2 and f"run {done.id} " in promoted.output, promoted.output


def test_the_memory_estimate_is_kept_per_problem_source(private_cache, tmp_path):
    """A problem estimated once is not estimated again: a later process reads the kept figures
    without importing sympy (the ~1.5 s every `eval` and `optimize` paid); an edited problem
    is estimated afresh, and a kept entry that is not an estimate is rebuilt, never trusted."""
    import json
    import subprocess
    import sys

    from kernelevolve.memory_estimate import too_big

    problem = tmp_path / "problem.py"
    problem.write_text(PROBLEM.read_text())
    assert too_big(problem) is None
    kept = sorted((private_cache / "memory_estimates").glob("*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["case"] == "32x1000"
    # ... nor does the comparison every evaluation reaching integrity makes of a mismatch
    probe = ("import sys, torch; from kernelevolve.memory_estimate import too_big\n"
             "from kernelevolve.harness.gates.compare import compare_outputs\n"
             "a = torch.zeros(2, 3, 4); b = a.clone(); b[1, 2, 3] = 1\n"
             "print(compare_outputs([a], [b]).mismatch.split(':')[0])\n"
             f"print(too_big({str(problem)!r}), 'sympy' in sys.modules)")
    env = {**os.environ, "KERNELEVOLVE_CACHE_DIR": str(private_cache)}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert out.stdout.splitlines() == ["first mismatch at [1, 2, 3]", "None False"], \
        out.stdout + out.stderr
    kept[0].write_text('{"bytes": "lots"}')
    assert too_big(problem) is None and json.loads(kept[0].read_text())["bytes"] > 0
    problem.write_text(PROBLEM.read_text() + "\n# edited\n")
    assert too_big(problem, available=1) is not None  # fresh figures, and a fresh MemAvailable
    assert len(list((private_cache / "memory_estimates").glob("*.json"))) == 2
