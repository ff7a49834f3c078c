"""A run tells the truth at a glance: loud LLM failures, distinct exit codes, preflight checks
before anything starts, `runs rm`, the resume hint on Ctrl-C. Real processes, real SQLite,
real HTTP servers on loopback (tests/llm_servers.py), real sandboxed workers."""
from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from outcomes import assert_measured_exit
from conftest import CORPUS, PROBLEMS, example, run_cli
from llm_servers import Reply, ScriptedServer
from one_finalist import one_finalist_config
from test_optimize import CANDIDATE, PROBLEM, one_line
from test_resume import _query

from kernelevolve import exit_codes

KEY_VAR = "KE_FAILURES_TEST_KEY"
SEED = CORPUS / "good_softmax_cpp.py"
# examples/softmax's model at 8-16x fewer elements, for a search whose subject is not the sizes.
SMALL = PROBLEMS / "softmax_small.py"
TIMEOUT = 600


def cli(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_cli(*map(str, args), env=env, timeout=TIMEOUT)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def no_runs(ws: Path) -> bool:
    if not (ws / "kernelevolve.db").exists():
        return True
    r = cli("runs", "--workspace", ws, "--json")
    return r.returncode == 0 and r.stdout.strip() == ""


# ---- preflight: nothing starts, no run is left behind ------------------------------------------

@pytest.mark.slow
def test_dead_endpoint_is_refused_before_any_worker_starts(tmp_path):
    ws = tmp_path / "ws"
    url = f"http://127.0.0.1:{closed_port()}/v1"
    start = time.monotonic()
    r = cli("optimize", example("softmax"), "--seed-candidate", SEED, "--llm", "openai:m",
            "--llm-base-url", url, "--workspace", ws)
    assert r.returncode == exit_codes.USAGE, r.stdout + r.stderr
    msg = one_line(r.stderr)
    assert "not reachable" in msg and url in msg and "--llm-base-url" in msg
    assert no_runs(ws)
    # Found before the sandboxed workers start (they take seconds); generous for a busy machine.
    assert time.monotonic() - start < 60


@pytest.mark.slow
def test_missing_api_key_is_refused_and_leaves_no_run(tmp_path):
    ws = tmp_path / "ws"
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    r = subprocess.run([sys.executable, "-m", "kernelevolve.cli", "optimize",
                        str(example("softmax")), "--llm", "anthropic:claude-test",
                        "--workspace", str(ws)], capture_output=True, text=True, env=env,
                       timeout=TIMEOUT)
    assert r.returncode == exit_codes.USAGE, r.stdout + r.stderr
    assert "no API key" in one_line(r.stderr) and "$ANTHROPIC_API_KEY" in r.stderr
    assert no_runs(ws)


@pytest.mark.slow
def test_unavailable_platform_and_unknown_language_are_refused(tmp_path):
    ws = tmp_path / "ws"
    r = cli("optimize", PROBLEM, "--seed-candidate", CANDIDATE, "--platform", "cuda",
            "--workspace", ws)
    assert r.returncode == exit_codes.USAGE
    assert "--platform cuda" in one_line(r.stderr) and "CUDA" in r.stderr
    with ScriptedServer() as server:
        r = cli("optimize", PROBLEM, "--seed-candidate", CANDIDATE, "--llm", "openai:m",
                "--llm-base-url", server.openai_base_url, "--language", "fortran",
                "--workspace", ws)
    assert r.returncode == exit_codes.USAGE
    msg = one_line(r.stderr)
    assert "'fortran'" in msg and "cpp, triton, python" in msg
    assert no_runs(ws)


def test_preflight_unit_checks():
    from kernelevolve.errors import KernelevolveError
    from kernelevolve.llm import LLMConfig
    from kernelevolve.preflight import check_llm, endpoint

    assert endpoint("http://127.0.0.1:8000/v1") == ("127.0.0.1", 8000)
    assert endpoint("https://example.invalid/v1") == ("example.invalid", 443)
    with pytest.raises(KernelevolveError, match="expected http"):
        endpoint("ftp://127.0.0.1/")
    with ScriptedServer() as server:  # a listening local server without a key: fine
        check_llm(LLMConfig("openai", "m", base_url=server.openai_base_url))
    secret_url = f"http://user:hunter2@127.0.0.1:{closed_port()}/v1"
    with pytest.raises(KernelevolveError, match="not reachable") as info:
        check_llm(LLMConfig("openai", "m", base_url=secret_url))
    assert "hunter2" not in str(info.value)  # credentials in a URL never reach the message


# ---- failing LLM calls stop the run, loudly -----------------------------------------------------

@pytest.mark.slow
def test_llm_that_fails_every_call_stops_the_run_with_exit_5(tmp_path):
    """Failures no retry fixes (an unknown model: 404): after --llm-max-failures calls in a row
    the run stops with the server's words, in the final text (not a terminal), the summary, the
    funnel and the report; the seed's measurement is kept and re-measured. (An auth error stops
    at the first call: tests/test_llm_calls.py.)"""
    ws = tmp_path / "ws"
    with ScriptedServer([Reply(status=404, text="no such model")]) as server:
        r = cli("optimize", SMALL, "--seed-candidate", SEED, "--operator", "llm",
                "--llm", "openai:test-model", "--llm-base-url", server.openai_base_url,
                "--llm-api-key-env", KEY_VAR, "--llm-max-failures", 2, "--max-evals", 6,
                "--no-compile-figures", "--workspace", ws, "--json", tmp_path / "s.json", env={KEY_VAR: "sk-test"})
        calls = len(server.requests)
    assert r.returncode == exit_codes.FAILED, r.stdout + r.stderr
    assert 2 <= calls <= 4  # stopped after two failed calls (two may have been in flight)
    out = r.stdout.replace("\n", " ")
    assert "stopped by failures: " in out and "LLM calls in a row failed" in out
    assert "404" in out and "LLM: " in out and "calls failed (last: " in out
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["outcome"]["kind"] == "stopped_by_failures"
    assert s["llm_failures"]["failed_calls"] >= 2 and "404" in s["llm_failures"]["last_error"]
    assert s["funnel"]["llm"] >= 2 and s["evaluations"] == 1  # the seed was measured
    assert "best kernel:" not in out  # no safe improvement over eager from a 0.2x seed
    r = cli("show", s["run_id"], "--workspace", ws)
    assert "LLM calls failed" in r.stdout.replace("\n", " ")
    r = cli("report", s["run_id"], "--workspace", ws, "--html", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert 'id="llm-failures"' in page and "404" in page
    assert re.search(r'id="llm-calls">LLM: \d calls, \d failed \(\d HTTP 404\); 0 retried', page)


def test_endpoint_dying_mid_run_stops_the_search(tmp_path):
    """The real client against a port that stops listening: connection errors, each retried,
    then the operator gives up and the engine stops with the reason."""
    from kernelevolve.llm import LLMClient, LLMConfig
    from kernelevolve.operators.base import OperatorFailing, ProposalContext
    from kernelevolve.operators.llm import LLMOperator
    from kernelevolve.operators.prompt import PromptBuilder

    config = LLMConfig("openai", "m", base_url=f"http://127.0.0.1:{closed_port()}/v1",
                       max_retries=1, retry_base_s=0.001, retry_cap_s=0.01, timeout_s=5,
                       max_failed_calls=3)
    events = []
    op = LLMOperator(LLMClient(config), PromptBuilder(str(example("softmax")), "cpu", "cpp"))
    ctx = ProposalContext(problem_path=str(example("softmax")),
                          problem_source=example("softmax").read_text(), platform="cpu",
                          parents=(), seen_hashes=frozenset(), seen_meta=(), rng_seed=1, want=1,
                          report=lambda kind, data: events.append((kind, data)))
    assert asyncio.run(op.propose(ctx)) == [] and op.failed_in_row == 1
    assert asyncio.run(op.propose(ctx)) == []
    with pytest.raises(OperatorFailing, match="3 LLM calls in a row failed; the last: .*onnect"):
        asyncio.run(op.propose(ctx))
    assert [k for k, _ in events] == ["llm_error"] * 3


# ---- exit codes ---------------------------------------------------------------------------------

# exit 4 (nothing to search from), end to end: tests/test_optimize.py's
# test_optimize_without_a_seed_or_drafting_operator_says_so (the same command; one run for both)


def test_exit_code_table():
    assert exit_codes.for_outcome({"kind": "improved"}) == 0
    codes = {exit_codes.for_outcome({"kind": k}) for k in
             ("no_safe_improvement", "nothing_to_search", "stopped_by_failures")}
    assert codes == {3, 4, 5}
    assert exit_codes.for_outcome({}) == exit_codes.FAILED  # unknown: never a silent 0
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    for code in (0, 2, 3, 4, 5, 130):  # documented for scripts
        assert f"| {code} |" in readme


@pytest.mark.slow
def test_sigint_prints_the_resume_hint_and_exits_130(tmp_path):
    ws = tmp_path / "ws"
    db = ws / "kernelevolve.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kernelevolve.cli", "optimize", str(PROBLEM), "--seed-candidate",
         str(CANDIDATE), "--operator", "tune", "--max-evals", "8", "--workspace", str(ws)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + TIMEOUT
    try:
        while not (_query(db, "SELECT COUNT(*) FROM evaluations") or (0,))[0]:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == exit_codes.INTERRUPTED, out + err
    run_id = _query(db, "SELECT id FROM runs")[0]
    assert f"resume with `kernelevolve resume {run_id} --workspace {ws}`" in \
        err.replace("\n", " ")
    assert _query(db, "SELECT status FROM runs")[0] == "interrupted"


# ---- runs rm --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_runs_rm_deletes_a_run_with_its_objects(tmp_path):
    from kernelevolve.config import RunConfig
    from kernelevolve.run import Run
    from kernelevolve.store import Store

    ws = tmp_path / "ws"
    shared, own = tmp_path / "shared.py", tmp_path / "own.py"
    shared.write_text(CANDIDATE.read_text())
    own.write_text(CANDIDATE.read_text() + "\n# only in the second run\n")
    keep = Run.create(PROBLEM, RunConfig(operators=["tune"]), seeds=[shared], workspace=ws)
    gone = Run.create(PROBLEM, RunConfig(operators=["tune"]), seeds=[shared, own], workspace=ws)
    store = Store.open(ws)
    store.set_run_status(gone.id, "interrupted")
    own_hash = store.nodes(gone.id)[-1].source_hash
    shared_hash = store.nodes(keep.id)[-1].source_hash
    assert (ws / "runs" / gone.id).is_dir() and store.objects.exists(own_hash)

    r = cli("runs", "rm", "--workspace", ws)
    assert r.returncode == 2 and "--status" in one_line(r.stderr)
    r = cli("runs", "rm", "--status", "bogus", "--workspace", ws)
    assert r.returncode == 2 and "interrupted" in one_line(r.stderr)
    r = cli("runs", "rm", "--status", "interrupted", "--workspace", ws)
    assert r.returncode == 0 and f"deleted run {gone.id}" in r.stdout, r.stderr
    assert not (ws / "runs" / gone.id).exists()
    assert not store.objects.exists(own_hash) and store.objects.exists(shared_hash)
    assert [run.id for run in store.list_runs()] == [keep.id]
    r = cli("runs", "rm", keep.id[:12], "--workspace", ws)
    assert r.returncode == 0 and keep.id in r.stdout
    r = cli("runs", "--workspace", ws, "--json")
    assert r.returncode == 0 and r.stdout.strip() == ""
    r = cli("runs", "rm", "nosuch", "--workspace", ws)
    assert r.returncode == 2 and "nosuch" in one_line(r.stderr)


# ---- the funnel, the same everywhere ------------------------------------------------------------

def test_funnel_text_counts_survivors():
    from kernelevolve.store.funnel import funnel_counts, funnel_text, survivors

    f = funnel_counts([("done", "static", 1), ("done", "correctness", 2), ("done", "accepted", 5),
                       ("pending", None, 1)], generation_failures=2, llm_failures=30)
    rows = survivors(f)
    assert rows[0] == ("attempts", 41, 0) and rows[1] == ("candidates", 9, 32)
    assert rows[2] == ("evaluated", 8, 1) and rows[-1] == ("accepted", 5, 0)
    assert [r[1] for r in rows] == sorted((r[1] for r in rows), reverse=True)
    text = funnel_text(f)
    assert text.startswith("attempts 41 -> candidates 9 (30 LLM calls failed, 2 replies "
                           "without usable code) -> evaluated 8 -> passed static 7")
    assert text.endswith("passed correctness 5 -> passed integrity 5 -> accepted 5")
    assert funnel_text(funnel_counts([])).startswith("candidates 0 -> passed static 0")


# ---- progress anywhere --------------------------------------------------------------------------

@pytest.mark.slow
def test_progress_without_a_terminal_is_one_line_per_evaluation(tmp_path):
    ws = tmp_path / "ws"
    r = cli("optimize", PROBLEM, "--seed-candidate", CANDIDATE, "--operator", "tune",
            "--max-evals", 3, "--workspace", ws, "--json", tmp_path / "s.json",
            "--config", one_finalist_config(tmp_path))  # no verdict asserted
    assert_measured_exit(r.returncode, json.loads((tmp_path / "s.json").read_text()),
                         r.stdout + r.stderr)
    lines = r.stdout.splitlines()
    evals = [line for line in lines if line.startswith("[") and "/3] node " in line]
    assert len(evals) == 3, r.stdout
    assert all(" · best so far >= " in line and "95% lower bound; measured" in line
               for line in evals)
    assert "phase: searching" in lines and "phase: re-measuring the finalists" in lines
    finals = [line for line in lines if line.startswith("finalist 1/1: node ")]
    assert len(finals) == 1 and " left" in finals[0], r.stdout  # what is measured, how long
    for line in lines:  # nothing hard-wrapped: every line is a whole statement
        assert not line.startswith(" "), r.stdout


@pytest.mark.slow
def test_json_lines_and_quiet(tmp_path):
    r = cli("optimize", PROBLEM, "--seed-candidate", CANDIDATE, "--operator", "tune",
            "--max-evals", 2, "--workspace", tmp_path / "ws", "--json-lines",
            "--config", one_finalist_config(tmp_path))  # no verdict asserted
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert_measured_exit(r.returncode, {"outcome": events[-1]}, r.stdout + r.stderr)
    kinds = [e["event"] for e in events]
    assert kinds.count("evaluation") == 2 and kinds[-1] == "outcome" and "phase" in kinds
    assert events[-1]["exit_code"] == r.returncode and events[-1]["message"]
    finalist = next(e for e in events if e["event"] == "finalist")
    assert finalist["k"] == finalist["of"] == 1 and finalist["node"] is not None
    first = next(e for e in events if e["event"] == "evaluation")
    assert {"node", "operator", "stage", "speedup", "best", "evaluations", "budget"} <= set(first)
    r = cli("optimize", PROBLEM, "--seed-candidate", CANDIDATE, "--operator", "tune",
            "--max-evals", 1, "--workspace", tmp_path / "ws", "--quiet",
            "--json", tmp_path / "quiet.json")
    assert_measured_exit(r.returncode, json.loads((tmp_path / "quiet.json").read_text()),
                         r.stdout + r.stderr)
    assert not any(line.startswith(("[", "phase:")) for line in r.stdout.splitlines())
    assert ("improved" in r.stdout) or ("no safe improvement" in r.stdout)
    r = cli("optimize", PROBLEM, "--quiet", "--json-lines", "--workspace", tmp_path / "ws")
    assert r.returncode == 2 and "choose one" in one_line(r.stderr)


def test_summary_diffs_the_best_kernel_against_its_parent(tmp_path):
    from kernelevolve.config import RunConfig
    from kernelevolve.report.summary import run_summary
    from kernelevolve.run import Run

    seed = tmp_path / "seed.py"
    seed.write_text(CANDIDATE.read_text())
    run = Run.create(PROBLEM, RunConfig(operators=["tune"]), seeds=[seed], workspace=tmp_path)
    child = CANDIDATE.read_text().replace("REPEAT = 64", "REPEAT = 1")
    assert child != CANDIDATE.read_text()
    node = run.store.add_node(run.id, parents=[1], operator="tune", rationale="REPEAT 64 -> 1",
                              source=child)
    from kernelevolve.report.summary import RunSummary
    from kernelevolve.types import EvalResult

    accepted = EvalResult(True, "accepted", "", fitness=2.0, speedup=2.0)
    run.store.record_evaluation(run.id, 1, EvalResult(True, "accepted", "", fitness=1.1,
                                                      speedup=1.1), 1.0)
    run.store.record_evaluation(run.id, node.id, accepted, 1.0)
    s = run_summary(run)
    assert s.reference_source == PROBLEM.read_text()
    assert s.best["node_id"] == node.id and s.best_diff["parent"] == 1
    assert "-REPEAT = 64" in s.best_diff["diff"] and "+REPEAT = 1" in s.best_diff["diff"]
    # `show --json` keeps its keys (scripts read them), and reads back as the same summary
    shown = json.loads(s.to_json())
    assert list(shown) == [
        "run_id", "status", "problem", "platform", "created", "elapsed_s", "stop_reason",
        "outcome", "best", "funnel", "evaluations", "nodes", "cost", "llm_failures",
        "fingerprint", "config", "machine", "best_source", "best_cases", "best_logs",
        "reference_source", "best_diff", "synth_coverage", "operators", "baselines",
        "tool_traffic", "compile_comparison"]
    assert RunSummary.from_dict(shown) == s and shown["evaluations"] == 2


def test_search_time_and_remeasured_figures_are_told_apart():
    from kernelevolve.report.summary import RunSummary, measurement_notes

    nodes = [{"id": 0, "stage": None, "fitness": 1.0},
             {"id": 5, "stage": "accepted", "fitness": 3.9},
             {"id": 11, "stage": "accepted", "fitness": 4.59}]
    notes = measurement_notes(RunSummary(nodes=nodes, outcome={
        "kind": "improved", "speedup": 3.63, "interval": [3.5, 3.8], "node_id": 5}))
    assert len(notes) == 1 and "search-time best 4.590x (node 11)" in notes[0]
    assert "re-measurement" in notes[0]
    wide = measurement_notes(RunSummary(nodes=nodes, outcome={
        "kind": "no_safe_improvement", "speedup": 1.1, "interval": [0.87, 1.47]}))
    assert wide[-1].startswith("warning: the 95% interval 0.870-1.470 is wide (about ±27%)")
    assert measurement_notes(RunSummary()) == []
