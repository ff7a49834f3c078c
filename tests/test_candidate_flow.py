"""A candidate's source enters once and then travels as text (`candidate_file.Candidate`).

`eval` checks and reads the user's file once and hands the evaluator the text; in `optimize`
a node's source goes from the store to the executor as text, so its nodes/ file (kept for
users) is never read back; the driver writes the text into the sandboxed job's own folder.
"""
from __future__ import annotations

import asyncio
import hashlib

import pytest

from conftest import CORPUS, PROBLEMS, TEST_STAGE_TIMEOUTS
from kernelevolve.candidate_file import Candidate, read_candidate
from kernelevolve.errors import CandidateError

PROBLEM = PROBLEMS / "tunable_scale.py"
CANDIDATE = PROBLEMS / "tunable_scale_candidate.py"


def test_read_candidate_checks_and_reads_once(tmp_path):
    path = tmp_path / "cand.py"
    path.write_text("class ModelNew: pass\n")
    cand = read_candidate(path)
    assert cand == Candidate("class ModelNew: pass\n", str(path.resolve()))
    assert cand.file_name == "cand.py"
    with pytest.raises(CandidateError, match=r"^candidate \S+nope.py: no such file"):
        read_candidate(tmp_path / "nope.py")
    cuda = tmp_path / "k.cu"
    cuda.write_text("__global__ void k() {}\n")
    with pytest.raises(CandidateError, match="--seed-candidate .*k.cu: candidates are Python"):
        read_candidate(cuda, "--seed-candidate")


@pytest.mark.slow
def test_the_local_executor_evaluates_text_with_no_file_behind_it(tmp_path):
    """The name is a path that does not exist: only the text can have reached the worker."""
    from kernelevolve.config import build_config
    from kernelevolve.executors.local import LocalExecutor
    from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator
    from kernelevolve.harness.driver.pool import Limits
    from kernelevolve.problem import load_problem

    missing = tmp_path / "gone" / "node7.py"
    cand = Candidate(CANDIDATE.read_text(), str(missing))
    quick = EvalOptions(timing=build_config(None, {}).search_timing)  # the suite's quick timing
    executor = LocalExecutor(Evaluator("cpu", limits=Limits(stage_timeouts=dict(
        TEST_STAGE_TIMEOUTS)), options=quick), 1)
    try:
        result = asyncio.run(executor.evaluate(load_problem(PROBLEM), cand))
    finally:
        executor.close()
    assert result.accepted, result.reason
    assert result.candidate == str(missing) and not missing.exists()
    assert result.source_hash == hashlib.sha256(cand.source.encode()).hexdigest()


@pytest.mark.slow
def test_optimize_evaluates_the_stored_source_not_the_node_file(tmp_path):
    """A node file overwritten before the search starts does not matter: the seed is evaluated
    from the store (the old path read nodes/node1.py back and was rejected at the static gate)."""
    from kernelevolve.config import build_config
    from kernelevolve.run import Run, RunConfig
    from kernelevolve.search.termination import Budgets
    from kernelevolve.store import Store

    ws = tmp_path / "ws"
    quick = build_config(None, {})  # the suite's quick timing (KERNELEVOLVE_CONFIG)
    config = RunConfig(operators=["tune"], budgets=Budgets(max_evals=1), final_top_k=1,
                       search_timing=quick.search_timing, final_timing=quick.final_timing)
    run = Run.create(PROBLEM, config, seeds=[CANDIDATE], workspace=ws)
    node_file = ws / "runs" / run.id / "nodes" / "node1.py"
    assert node_file.read_text() == CANDIDATE.read_text()  # the users' copy is still written
    node_file.write_text("raise SystemExit('read back from the file')\n")
    run.execute()
    with Store.open(ws) as store:
        first = _typed(store.evaluation(run.id, 1))
        finals = [_typed(e.data["result"]) for e in store.events(run.id, "final_measurement")]
    assert first.accepted, first.reason
    assert first.source_hash == hashlib.sha256(CANDIDATE.read_bytes()).hexdigest()
    assert first.candidate == str(node_file)
    assert finals and all(f.accepted and f.candidate == str(node_file) for f in finals)


def _typed(result):
    """The stored result as an EvalResult (the store hands back either, while results become
    typed through the store: issue 28)."""
    from kernelevolve.types import EvalResult

    return EvalResult.from_dict(result) if isinstance(result, dict) else result


def test_eval_checks_the_candidate_once_and_hands_over_its_text(monkeypatch, tmp_path):
    """One check where the file enters: the evaluator gets a `Candidate` (text), and the
    static gate's rejection is said once."""
    import kernelevolve.candidate_file as candidate_file
    from typer.testing import CliRunner

    from kernelevolve.cli import app
    from kernelevolve.harness.driver.evaluate import Evaluator

    checks, handed = [], []
    check = candidate_file.check_candidate_file
    monkeypatch.setattr(candidate_file, "check_candidate_file",
                        lambda *a, **k: checks.append(a) or check(*a, **k))
    evaluate = Evaluator.evaluate
    monkeypatch.setattr(Evaluator, "evaluate",
                        lambda self, prob, cand, **k: handed.append(cand) or
                        evaluate(self, prob, cand, **k))
    bad = CORPUS / "bad_subprocess.py"
    res = CliRunner().invoke(app, ["eval", str(PROBLEM), str(bad)])
    assert res.exit_code == 1, res.output
    assert len(checks) == 1
    assert [type(c) for c in handed] == [Candidate] and handed[0].source == bad.read_text()
    assert res.output.count("REJECTED at static") == 1, res.output
    assert res.output.count("forbidden construct(s)") == 1, res.output
