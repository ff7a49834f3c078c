"""`kernelevolve tune-model` end to end, with real subprocesses and real searches (the built-in
synthesizer) on a small MLP whose two inline regions it fuses (problems/models/):

- killed (SIGTERM) while the second hot spot's search runs, the same command resumes: the
  analysis and the problem files are reused, the run ids are the same, no evaluation is
  repeated, the budgets are spent exactly, and the summary (--json) names the figures;
- the patched model falls back (counted under "shape") outside the region the problems'
  cases validated and serves inside it, with eager's outputs;
- bad input is one line and exit 2;
- the extracted problems are ordinary problems for `kernelevolve optimize`.
"""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import PROBLEMS, run_cli
from outcomes import assert_measured_exit

MODEL = PROBLEMS / "models" / "mlp_norm_gelu.py"
CAMPAIGN_WAIT_S = 600  # generous: a loaded 2-core box


def _tune_cmd(ws: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kernelevolve.cli", "tune-model", str(MODEL),
            "--workspace", str(ws), "--max-evals", "2", "--reps", "3", *extra]


def _campaign(ws: Path) -> dict | None:
    found = list((ws / "benches").glob("tune-*.json"))
    if not found:
        return None
    try:
        return json.loads(found[0].read_text())
    except ValueError:  # written by rename, so never half a file; be safe anyway
        return None


def _evals(ws: Path, run_ids: list[str]) -> dict[str, int]:
    from kernelevolve.store import Store

    with Store.open(ws) as store:
        return {r: store.eval_count(r) for r in run_ids}


def _evals_now(ws: Path, run_id: str) -> int:
    """The run's evaluations so far, read while tune-model writes, through a read-only
    connection (a reader has no business writing; tests/test_store.py's
    test_a_second_open_in_a_writing_process_keeps_its_locks covers a writable poller)."""
    import sqlite3

    conn = sqlite3.connect(f"file:{ws / 'kernelevolve.db'}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute("SELECT COUNT(*) FROM evaluations WHERE run_id = ?",
                            (run_id,)).fetchone()[0]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """One workspace, tuned in two invocations: the first (--no-compile) killed during the
    second hot spot's search, the second (with torch.compile) resuming it to the end."""
    ws = tmp_path_factory.mktemp("tune") / "ws"
    first_json = ws.parent / "first.json"
    proc = subprocess.Popen(_tune_cmd(ws, "--no-compile", "--json", str(first_json)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + CAMPAIGN_WAIT_S
    state = None
    try:
        while time.monotonic() < deadline:
            state = _campaign(ws)
            if state and len(state["rows"]) >= 2 and state["rows"][0]["status"] == "done" \
                    and state["rows"][1].get("run_id"):
                break
            if proc.poll() is not None:  # it ended before the second hot spot's search ran
                out, err = proc.communicate()
                pytest.fail(f"tune-model exited {proc.returncode} before the second hot spot's "
                            f"search was seen running; campaign rows: "
                            f"{json.dumps((state or {}).get('rows'), default=str)[:3000]}\n"
                            f"stdout tail: {out[-1500:]}\nstderr tail: {err[-1500:]}")
            time.sleep(0.2)
        else:
            pytest.fail(f"the first search did not finish in {CAMPAIGN_WAIT_S} s: {state}")
        # into the second hot spot's search: after its first evaluation when that comes
        # soon (then the resumed run must not evaluate it again), else after half a second
        second = state["rows"][1]["run_id"]
        soon = time.monotonic() + 30
        time.sleep(0.5)
        while time.monotonic() < soon and proc.poll() is None \
                and _evals_now(ws, second) < 1:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, killed_err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    killed = {"rc": proc.returncode, "stderr": killed_err, "state": _campaign(ws),
              "json_written": first_json.exists()}
    rows = killed["state"]["rows"]
    killed["evals"] = _evals(ws, [r["run_id"] for r in rows if r.get("run_id")])
    from kernelevolve.store import Store

    with Store.open(ws) as store:
        killed["second_status"] = store.get_run(rows[1]["run_id"]).status
    final_json = ws.parent / "final.json"
    resumed = subprocess.run(_tune_cmd(ws, "--json", str(final_json)), capture_output=True,
                             text=True, timeout=CAMPAIGN_WAIT_S)
    summary = json.loads(final_json.read_text()) if final_json.exists() else None
    return {"ws": ws, "killed": killed, "resumed": resumed, "summary": summary,
            "state": _campaign(ws)}


@pytest.mark.slow
def test_a_killed_tune_resumes_without_repeating_an_evaluation(tuned):
    killed, resumed = tuned["killed"], tuned["resumed"]
    assert killed["rc"] == 130, killed["stderr"]
    assert "run the same command to resume" in killed["stderr"]
    assert "Traceback" not in killed["stderr"]
    assert not killed["json_written"]  # no summary of a loop that did not finish
    first, second = killed["state"]["rows"][:2]
    assert first["status"] == "done" and second["status"] == "running"
    assert killed["second_status"] in ("interrupted", "completed")

    assert resumed.returncode == (0 if tuned["summary"]["safe"] else 3), resumed.stderr
    assert "reusing the analysis" in resumed.stderr
    rows = tuned["state"]["rows"]
    assert [r["status"] for r in rows] == ["done"] * len(rows)
    assert rows[0]["run_id"] == first["run_id"] and rows[1]["run_id"] == second["run_id"]
    evals = _evals(tuned["ws"], [r["run_id"] for r in rows])
    assert evals[first["run_id"]] == killed["evals"][first["run_id"]]
    assert evals[second["run_id"]] >= killed["evals"][second["run_id"]]
    # each row's budget (spread by Amdahl weight, at least 2) spent exactly: the evaluation
    # the kill cut short is not counted twice, nor one left unspent
    assert all(r["max_evals"] >= 2 for r in rows)
    assert sum(evals.values()) == sum(r["max_evals"] for r in rows)
    assert [r["evals"] for r in rows] == [evals[r["run_id"]] for r in rows]
    from kernelevolve.store import Store

    with Store.open(tuned["ws"]) as store:
        assert len(store.list_runs()) == len(rows)  # resumed, not started over


@pytest.mark.slow
def test_the_summary_names_hot_spots_verdicts_and_the_whole_model_figures(tuned):
    s = tuned["summary"]
    assert s is not None, tuned["resumed"].stderr
    assert isinstance(s["hot_spots"], list) and len(s["hot_spots"]) == 2
    labels = sorted(h["label"] for h in s["hot_spots"])
    assert any("rsqrt" in lab and "silu" in lab for lab in labels), labels
    assert any("tanh" in lab for lab in labels), labels
    assert [v["kind"] for v in s["verdicts"]] == [h["kind"] for h in s["hot_spots"]]
    for v in s["verdicts"]:
        assert v["run_id"] and v["status"] == "done" and v["verdict"]
    m = s["model"]
    for key in ("eager_ms", "patched_ms", "compile_ms", "speedup", "interval",
                "speedup_over_compile", "max_abs_err", "outputs_match"):
        assert key in m, key
    assert m["eager_ms"] > 0 and m["patched_ms"] > 0
    assert m["speedup"] > 0 and m["interval"][0] <= m["speedup"] <= m["interval"][1]
    # this invocation timed torch.compile too (the killed one had --no-compile)
    assert m["compile_failed"] is None, m["compile_failed"]
    assert m["compile_ms"] > 0
    # patched over torch.compile: paired rep by rep, like the speedup over eager
    assert m["speedup_over_compile"] > 0
    lo, hi = m.get("interval_over_compile") or (m["speedup_over_compile"],) * 2
    assert lo <= m["speedup_over_compile"] <= hi
    assert m["outputs_match"] is True and m["max_abs_err"] < 1e-3
    assert (tuned["resumed"].returncode == 0) == s["safe"]
    # each promoted kernel was timed inside the model; only one faster there is served
    for v in s["verdicts"]:
        if v.get("promoted"):
            situ = v["in_situ"]
            assert bool(v.get("served")) == (situ["patched_ms"] < situ["eager_ms"]), v
            assert bool(v.get("not_served")) != bool(v.get("served")), v


def _patched(tuned):
    from kernelevolve.model.serve import patched_model
    from kernelevolve.model.workload import load_model_file

    s = tuned["summary"]
    assert s is not None, tuned["resumed"].stderr
    # every promoted kernel, served or not after the in-place check (a loaded machine may
    # find one no faster inside the model): the fallback is the registry's, either way
    verdicts = [{**v, "served": v.get("promoted")} for v in s["verdicts"]]
    served = [v["served"]["name"] for v in verdicts if v.get("served")]
    assert served, f"no hot spot was promoted: {s['verdicts']}"
    mf = load_model_file(MODEL)
    case = next(c for c in mf.cases if not c.held_out)
    module, session = patched_model(mf, tuned["ws"], s["hot_spots"], verdicts,
                                    mf.inputs(case))
    assert session is not None
    return mf, module, session, served


def _delta(before: dict, after: dict) -> dict:
    fb = {k: v - before["fallbacks"].get(k, 0) for k, v in after["fallbacks"].items()}
    return {"calls": after["calls"] - before["calls"],
            "served": after["served"] - before["served"],
            "fallbacks": {k: v for k, v in fb.items() if v}}


@pytest.mark.slow
def test_the_patched_model_falls_back_outside_the_validated_region_and_serves_inside(tuned):
    import kernelevolve
    from kernelevolve.registry.patching import reset_coverage

    # before patching: a dispatcher keeps the counters it was created with
    reset_coverage()
    mf, module, session, served = _patched(tuned)
    eager = mf.build()
    try:
        before = {n: kernelevolve.coverage(n) for n in served}
        outside = torch.randn(3, 256)  # batch 3: far below the problems' cases (256, 384)
        with torch.inference_mode():
            got, want = module(outside), eager(outside)
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
        after = {n: kernelevolve.coverage(n) for n in served}
        for name in served:
            assert _delta(before[name], after[name]) == {
                "calls": 1, "served": 0, "fallbacks": {"shape": 1}}, after[name]

        inside = torch.randn(256, 256)  # a batch of the workload's CASES
        with torch.inference_mode():
            got, want = module(inside), eager(inside)
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
        again = {n: kernelevolve.coverage(n) for n in served}
        for name in served:
            assert _delta(after[name], again[name]) == {
                "calls": 1, "served": 1, "fallbacks": {}}, again[name]
    finally:
        session.unpatch()
        reset_coverage()


@pytest.mark.slow
def test_tuned_model_serves_the_promoted_kernels_to_the_users_code(tuned):
    """From the user's side, after tune-model: kernelevolve.tuned_model(MODEL, WORKSPACE)."""
    import kernelevolve
    from kernelevolve.errors import UsageError

    with pytest.raises(UsageError, match="no finished tune-model run"):
        kernelevolve.tuned_model(MODEL, tuned["ws"].parent / "elsewhere")
    module, session = kernelevolve.tuned_model(MODEL, tuned["ws"])
    served = {v["served"]["name"] for v in tuned["summary"]["verdicts"] if v.get("served")}
    try:
        # what the in-place check kept: every served kernel, nothing else
        assert {d.name for d in session.dispatchers} == served if served else session is None
        from kernelevolve.model.workload import load_model_file

        x = torch.randn(256, 256)
        with torch.inference_mode():
            torch.testing.assert_close(module(x), load_model_file(MODEL).build()(x),
                                       atol=1e-4, rtol=1e-4)
    finally:
        if session is not None:
            session.unpatch()


@pytest.mark.slow
def test_the_extracted_problems_are_ordinary_problems(tuned, tmp_path):
    from kernelevolve.problem import load_problem
    from kernelevolve.store import Store

    s = tuned["summary"]
    assert s is not None, tuned["resumed"].stderr
    state = Path(s["state"])
    paths = [Path(h["problem"]) for h in s["hot_spots"]]
    for p in paths:
        assert p.is_file() and p.parent == state / "problems"
        problem = load_problem(p)
        assert [c.held_out for c in problem.cases].count(True) == 1
    # each search ran on the extracted file itself
    with Store.open(tuned["ws"]) as store:
        for v in s["verdicts"]:
            assert Path(store.get_run(v["run_id"]).problem_path).resolve() == Path(
                v["problem"]).resolve()
    # and `kernelevolve optimize` takes one as it takes any problem
    out = run_cli("optimize", str(paths[0]), "--workspace", str(tmp_path / "ws"),
                  "--max-evals", "1", "--json", str(tmp_path / "run.json"))
    run = json.loads((tmp_path / "run.json").read_text())
    assert_measured_exit(out.returncode, run, out.stderr)
    with Store.open(tmp_path / "ws") as store:
        (rec,) = store.list_runs()
        assert Path(rec.problem_path).resolve() == paths[0].resolve()
        assert store.eval_count(rec.id) == 1
    assert run


NO_MODEL_INIT = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        raise RuntimeError("weights file missing")
    def forward(self, x):
        return x
def get_inputs():
    return [torch.randn(4, 4)]
def get_init_inputs():
    return []
'''

BAD_INPUTS = '''import torch
import torch.nn as nn
class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)
def get_inputs():
    raise ValueError("no data here")
def get_init_inputs():
    return []
'''

ONLY_LINEAR = '''import torch
import torch.nn as nn
CASES = [{"name": "b64", "weight": 1.0, "BATCH": 64}]
BATCH = 64
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)
    def forward(self, x):
        return self.fc(x)
def get_inputs():
    return [torch.randn(BATCH, 64)]
def get_init_inputs():
    return []
'''


def _one_line_usage_error(out) -> str:
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr and "Traceback" not in out.stdout
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert lines, out.stdout
    return lines[-1]  # progress lines may come before it


@pytest.mark.slow
@pytest.mark.parametrize("name,text,expected", [
    ("init_raises", NO_MODEL_INIT, "weights file missing"),
    ("inputs_raise", BAD_INPUTS, "no data here"),
    ("only_linear", ONLY_LINEAR, "nothing hot enough to extract"),
], ids=["init_raises", "inputs_raise", "only_linear"])
def test_bad_model_files_are_one_line_and_exit_2(tmp_path, name, text, expected):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    out = run_cli("tune-model", str(path), "--workspace", str(tmp_path / "ws"),
                  "--max-evals", "2", "--reps", "3", "--no-compile")
    err = _one_line_usage_error(out)
    assert expected in err and f"{name}.py" in err, err
    if name == "only_linear":  # the analysis ran; no search was started
        assert not list((tmp_path / "ws").glob("benches/*.json"))


@pytest.mark.slow
def test_a_bad_budget_is_one_line_and_exit_2(tmp_path):
    out = run_cli("tune-model", str(MODEL), "--workspace", str(tmp_path / "ws"),
                  "--max-evals", "0")
    err = _one_line_usage_error(out)
    assert "--max-evals 0: must be at least 1" in err
    assert not (tmp_path / "ws").exists()
