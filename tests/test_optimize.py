"""`kernelevolve optimize` / `resume` end to end: real processes, real SQLite, real sandboxed
workers, real g++.

The fixture candidate (tests/problems/tunable_scale_candidate.py) repeats an idempotent
pointwise pass REPEAT times, so its best configuration is known: REPEAT = 1. Its space has
4 x 2 = 8 configurations; the seed starts at the slowest (REPEAT = 64), so an 8-evaluation
budget covers the whole space and the answer does not depend on the search's path.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import PROBLEMS, run_cli
from outcomes import assert_measured_exit
from kernelevolve.operators.tunables import read_config

PROBLEM = PROBLEMS / "tunable_scale.py"
CANDIDATE = PROBLEMS / "tunable_scale_candidate.py"
EXAMPLE_RMSNORM = Path(__file__).resolve().parent.parent / "examples" / "rmsnorm" / "problem.py"
CLI_TIMEOUT = 300        # one optimize of 8 evaluations takes ~25 s here; be generous under load
SUMMARY_KEYS = {"run_id", "status", "outcome", "best", "funnel", "evaluations", "nodes"}
FUNNEL_KEYS = ("proposed", "static", "load", "run", "correctness", "integrity", "timing",
               "accepted")

pytestmark = pytest.mark.slow


def cli(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*map(str, args), timeout=CLI_TIMEOUT)


def fast_timing():
    from kernelevolve.harness.protocol.timing import TimingPolicy

    return TimingPolicy(min_reps=5, min_time_s=0.1, max_time_s=1.0)


def one_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1, f"expected a one-line message, got:\n{text}"
    return lines[0]


def show(ws: Path, run_id: str) -> dict:
    r = cli("show", run_id, "--workspace", ws, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


# ---- end to end on the CLI ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def e2e(tmp_path_factory, tunable_run):
    """One `optimize` run shared by the CLI tests below (the expensive part: ~12 s), on the
    suite's quick timing (KERNELEVOLVE_CONFIG): conftest's tunable_run, the session's one search
    of this space (test_ray_executor.py compares its Ray run with it). Files the tests write go
    to `tmp`, never into its workspace. The evaluation that also times torch.compile:
    test_prompt_context.py, whose LLM run pays for that compile anyway."""
    r, summary = tunable_run["proc"], tunable_run["summary"]
    assert summary is not None, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    # 0 improved, 3 no safe improvement (a loaded machine can blur a small win), as the
    # finalists' intervals decide
    assert_measured_exit(r.returncode, summary, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return {"tmp": tmp_path_factory.mktemp("e2e"), "ws": tunable_run["ws"], "proc": r,
            "summary": summary}


def test_every_node_keeps_its_source_and_compiled_library_as_artifacts(e2e):
    from kernelevolve.store import Store

    s, ws = e2e["summary"], e2e["ws"]
    with Store.open(ws) as store:
        for node in store.nodes(s["run_id"])[1:]:
            kinds = {(a.kind, a.name) for a in store.artifacts(s["run_id"], node.id)}
            assert ("source", "candidate.py") in kinds
            libs = [name for kind, name in kinds if kind == "library"]
            assert len(libs) == 1 and libs[0].endswith(".so"), kinds
            data = store.artifact(s["run_id"], node.id, "library", libs[0])
            assert data[:4] == b"\x7fELF"  # the compiled kernel itself


def test_optimize_cli_finds_the_known_best_configuration(e2e):
    s, ws, tmp = e2e["summary"], e2e["ws"], e2e["tmp"]
    assert s["status"] == "completed"
    assert s["evaluations"] == 8
    outcome = s["outcome"]
    assert outcome["kind"] in ("improved", "no_safe_improvement") and outcome["message"]
    assert "evaluation budget" in outcome["stop_reason"]
    # The whole 8-point space was measured, and the answer is the fastest configuration.
    configs = [read_config(source) for source in _sources(ws, s["run_id"])]
    assert len({json.dumps(c, sort_keys=True) for c in configs}) == 8
    best = tmp / "best.py"
    r = cli("best", s["run_id"], "--workspace", ws, "--out", best)
    assert r.returncode == 0, r.stderr
    finalists = [(f, next((n["stage"], n.get("reason", "")[:200]) for n in s["nodes"]
                          if n["id"] == f["node_id"])) for f in outcome["finalists"]]
    assert read_config(best.read_text())["REPEAT"] == 1, (outcome["message"], finalists)
    assert s["best_source"] == best.read_text()
    # The run's printed answer names the run, the outcome and where the best kernel is.
    out = e2e["proc"].stdout
    assert s["run_id"] in out and outcome["message"] in out.replace("\n", " ")
    best_py = ws / "runs" / s["run_id"] / "best.py"
    if outcome["kind"] == "improved":
        assert best_py.is_file() and f"best kernel: {best_py}" in out.replace("\n", "")
    else:  # a best candidate that is not a safe improvement is not announced as the answer
        assert not best_py.exists() and "not a safe improvement: " in out


def _sources(ws: Path, run_id: str) -> list[str]:
    from kernelevolve.store import Store

    with Store.open(ws) as store:
        return [store.source(run_id, n.id) for n in store.nodes(run_id) if n.id != 0]


def test_runs_show_best_and_report_commands(e2e):
    s, ws, tmp = e2e["summary"], e2e["ws"], e2e["tmp"]
    run_id = s["run_id"]

    r = cli("runs", "--workspace", ws, "--json")
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.strip()]
    assert [row["run_id"] for row in rows] == [run_id]
    assert rows[0]["status"] == "completed" and rows[0]["evaluations"] == 8

    shown = show(ws, run_id)
    assert SUMMARY_KEYS <= set(shown)
    assert shown["run_id"] == run_id and shown["status"] == "completed"
    assert shown["outcome"]["message"] == s["outcome"]["message"]
    assert {"node_id", "speedup", "fitness"} <= set(shown["best"])
    assert all(key in shown["funnel"] for key in FUNNEL_KEYS)
    assert shown["funnel"]["proposed"] == 8
    assert sum(shown["funnel"][k] for k in FUNNEL_KEYS[1:]) == 8  # every candidate has a verdict
    assert shown["evaluations"] == 8
    assert len(shown["nodes"]) == 9  # the reference root plus eight candidates
    for node in shown["nodes"]:
        assert {"id", "parents", "operator", "stage", "fitness"} <= set(node)
    assert [n["id"] for n in shown["nodes"] if n["parents"] == []] == [0]
    best_node = next(n for n in shown["nodes"] if n["id"] == shown["best"]["node_id"])
    assert best_node["stage"] == "accepted" and best_node["fitness"] == shown["best"]["fitness"]

    r = cli("show", run_id[:12], "--workspace", ws)  # a unique prefix works too; text view
    assert r.returncode == 0 and run_id in r.stdout, r.stderr
    for node in shown["nodes"]:  # a pipe is no 80-column terminal: each rationale whole
        assert (node["rationale"] or "")[:60] in r.stdout, r.stdout

    html = tmp / "out.html"
    r = cli("report", run_id, "--workspace", ws, "--html", html)
    assert r.returncode == 0, r.stderr
    page = html.read_text()
    assert run_id in page and page.lstrip().lower().startswith("<!doctype html")


# ---- Python API and user errors ---------------------------------------------------------------

def test_python_api_optimize_and_load(tmp_path):
    """kernelevolve.optimize reads its settings as the CLI does: KERNELEVOLVE_CONFIG (the suite's
    quick timing, tests/conftest.py) when no config is passed, a passed config file instead."""
    import kernelevolve
    from kernelevolve.config import build_config
    from one_finalist import one_finalist_config

    ws = tmp_path / "ws"
    run = kernelevolve.optimize(PROBLEM, seeds=[CANDIDATE], workspace=ws, max_evals=2)
    assert run.status == "completed"
    assert run.store.eval_count(run.id) == 2
    assert run.outcome["message"]
    quick = build_config(None, {})
    assert (run.config.search_timing, run.config.final_timing) == (quick.search_timing,
                                                                    quick.final_timing)
    assert run.config.budgets.max_evals == 2 and run.config.final_top_k == 3
    loaded = kernelevolve.Run.load(run.id, ws)
    assert loaded.summary() == run.summary()
    assert loaded.best_source() == run.summary().best_source
    assert (ws / "runs" / run.id / "best.py").is_file() == (run.outcome["kind"] == "improved")
    other = kernelevolve.optimize(PROBLEM, seeds=[CANDIDATE], workspace=ws, max_evals=1,
                                  config=one_finalist_config(tmp_path), policy="greedy")
    assert (other.config.final_top_k, other.config.policy) == (1, "greedy")
    assert other.store.eval_count(other.id) == 1


def test_python_api_usage_errors(tmp_path):
    import kernelevolve
    from kernelevolve.errors import UsageError

    ws = tmp_path / "ws"
    with pytest.raises(UsageError, match="ucb, beam, greedy, random"):
        kernelevolve.optimize(PROBLEM, seeds=[CANDIDATE], workspace=ws, policy="annealing")
    with pytest.raises(UsageError, match=r"unknown operator 'anneal'; registered operators: "
                                         r".*tune"):
        kernelevolve.optimize(PROBLEM, seeds=[CANDIDATE], workspace=ws, operators=["anneal"])
    missing = tmp_path / "missing_candidate.py"
    with pytest.raises(UsageError, match=f"{missing}: no such file"):
        kernelevolve.optimize(PROBLEM, seeds=[missing], workspace=ws)
    with pytest.raises(UsageError, match="max-evals"):
        kernelevolve.optimize(PROBLEM, seeds=[CANDIDATE], workspace=ws, max_evals=0)
    assert not ws.exists()  # refused before anything was written
    with pytest.raises(UsageError, match="no kernelevolve workspace"):
        kernelevolve.Run.load("r1", ws)


def test_cli_usage_errors_are_one_line(tmp_path):
    ws = tmp_path / "ws"
    r = cli("resume", "nosuchrun", "--workspace", ws)
    assert r.returncode == 2 and "no kernelevolve workspace" in one_line(r.stderr)

    from kernelevolve.store import Store

    Store.open(ws).close()  # an empty workspace: the run id itself is unknown
    r = cli("resume", "nosuchrun", "--workspace", ws)
    assert r.returncode == 2
    msg = one_line(r.stderr)
    assert "nosuchrun" in msg and "kernelevolve runs" in msg

    r = cli("optimize", PROBLEM, "--seed-candidate", CANDIDATE, "--policy", "annealing",
            "--workspace", ws)
    assert r.returncode == 2 and "ucb, beam, greedy, random" in one_line(r.stderr)
    r = cli("optimize", PROBLEM, "--seed-candidate", tmp_path / "nope.py", "--workspace", ws)
    assert r.returncode == 2 and "no such file" in one_line(r.stderr)
    r = cli("runs", "--workspace", ws, "--json")
    assert r.returncode == 0 and r.stdout.strip() == ""  # the refusals created no run


def test_optimize_without_a_seed_or_drafting_operator_says_so(tmp_path):
    """Also the exit code's own test (4, exit_codes.NOTHING_TO_SEARCH; test_run_feedback.py
    holds the exit-code table): one run serves both."""
    from kernelevolve import exit_codes

    ws, summary_path = tmp_path / "ws", tmp_path / "s.json"
    r = cli("optimize", PROBLEM, "--operator", "tune", "--max-evals", 3, "--workspace", ws,
            "--json", summary_path)
    assert r.returncode == 4, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert r.returncode == exit_codes.NOTHING_TO_SEARCH
    s = json.loads(summary_path.read_text())
    assert s["status"] == "completed" and s["evaluations"] == 0
    assert s["outcome"]["kind"] == "nothing_to_search"
    assert "--seed-candidate" in s["outcome"]["message"]
    assert s["best"] is None
    assert "--seed-candidate" in r.stderr and "nothing to search from" in r.stdout
    assert "--seed-candidate" in r.stdout
    assert "re-measuring" not in r.stdout + r.stderr  # no finalist: no phase for it
    assert not (ws / "runs" / s["run_id"] / "best.py").exists()


def test_optimize_without_a_seed_drafts_with_synth_then_tunes(tmp_path):
    """The README's main job: no seed, no LLM; synth drafts a fused kernel, tune explores it."""
    ws, summary_path = tmp_path / "ws", tmp_path / "s.json"
    r = cli("optimize", EXAMPLE_RMSNORM, "--max-evals", 2, "--workspace", ws,
            "--json", summary_path)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "drafting from the reference with synth" in r.stderr
    s = json.loads(summary_path.read_text())
    ops = {n["operator"] for n in s["nodes"]}
    assert {"reference", "synth", "tune"} <= ops
    synth = [n for n in s["nodes"] if n["operator"] == "synth"]
    assert synth and synth[0]["stage"] == "accepted"
    assert s["outcome"]["kind"] == "improved", s["outcome"]  # rmsnorm: ~3x over eager here
    assert "fuses pow, mean, add, rsqrt, mul, mul" in s["synth_coverage"]  # the coverage report


def test_search_efficiency_benchmark_runs(tmp_path):
    """benchmarks/search_efficiency.py on a tiny budget: its landscape checks hold, it drives
    the real engine and tune operator, and --json writes what the table shows."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "search_efficiency.py"
    spec = importlib.util.spec_from_file_location("search_efficiency", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    assert bench.main(["--seeds", "2", "--cap", "60", "--json", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["landscape"]["configurations"] == 2304
    assert set(data["results"]) == {"ucb", "beam", "greedy", "random search"}
    for r in data["results"].values():
        assert len(r["evaluations_to_optimum"]) == 2 and r["cap"] == 60
        assert all(n is None or 1 < n <= 60 for n in r["evaluations_to_optimum"])
    # the policies find the optimum well inside the cap from these starts
    assert data["results"]["greedy"]["reached"] >= 1


def test_a_run_stored_with_mixed_baselines_is_read_back_on_one():
    from kernelevolve.search.baselines import fitness_for
    from kernelevolve.types import EvalResult

    old_first = EvalResult.from_dict({"accepted": True, "stage": "accepted",
                                      "baseline": "compile", "fitness": 3.87, "speedup": 7.78,
                                      "compile_speedup": 3.87})
    assert fitness_for(old_first, "eager") == pytest.approx(7.78)
    assert fitness_for(old_first, "compile") == pytest.approx(3.87)
    rejected = EvalResult.from_dict({"accepted": False, "stage": "timing", "fitness": 0.0})
    assert fitness_for(rejected, "eager") is None
