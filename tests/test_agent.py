"""The agent's tool loop (`--agent`) end to end: local servers speaking the real OpenAI and
Anthropic protocols with scripted tool calls, the real sandboxed harness, real g++. No real
provider is ever contacted."""
from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from conftest import PROBLEMS, run_cli
from llm_servers import Reply, ScriptedServer
from one_finalist import one_finalist_config

KEY_VAR = "AGENTTESTCRED"
SECRET = "sk-agent-test-0123456789"
PROBLEM = PROBLEMS / "agent_affine.py"
GOOD = '''import ctypes

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

SRC = r"""
#include <cstdint>
extern "C" void affine(const float* x, float* y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) y[i] = 2.0f * x[i] + 1.0f;
}
"""
_lib = load_cpp(SRC, name="agent_affine")
_lib.affine.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
_lib.affine.restype = None


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.affine(ptr(x), ptr(y), x.numel())
        return y
'''
BROKEN = GOOD.replace("2.0f * x[i]", "undeclared_scale * x[i]")


def _call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def optimize(server: ScriptedServer, ws: Path, provider: str, *extra: str, evals: int = 1):
    config = one_finalist_config(ws.parent)  # no test here asserts a verdict
    proc = run_cli("optimize", str(PROBLEM), "--operator", "llm", "--agent",
                   "--config", str(config), "--llm", f"{provider}:test-agent-model",
                   "--llm-base-url", server.base_url_for(provider), "--llm-api-key-env", KEY_VAR,
                   "--max-evals", str(evals), "--workspace", str(ws), "--json", str(ws / "s.json"),
                   "--quiet", "--no-compile-figures", *extra, env={KEY_VAR: SECRET},
                   timeout=900)
    assert (ws / "s.json").exists(), proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc, json.loads((ws / "s.json").read_text())


def events(ws: Path, run_id: str, kind: str) -> list[dict]:
    from kernelevolve.store import Store

    return [e.data for e in Store.open(ws).events(run_id, kind)]


def _agent_search(tmp_path_factory, provider: str, script):
    ws = tmp_path_factory.mktemp(f"agent-{provider}") / "ws"
    with ScriptedServer(handler=script) as server:
        proc, summary = optimize(server, ws, provider, "--policy", "greedy", evals=2)
        requests = list(server.requests)
    return ws, proc, summary, requests


@pytest.fixture(scope="module")
def openai_run(tmp_path_factory):
    """The draft's tool loop (compile, time, submit), then the improvement's paired `time`
    edits (agent_script)."""
    return _agent_search(tmp_path_factory, "openai", agent_script)


@pytest.fixture(scope="module")
def anthropic_run(tmp_path_factory):
    """The same draft; its improvement compiles an edit and reads a note in one turn, then
    submits (the paired `time` is the OpenAI run's: its logic does not depend on the protocol,
    and its evaluations take seconds each)."""
    return _agent_search(tmp_path_factory, "anthropic", anthropic_script)


@pytest.fixture(params=["openai", "anthropic"])
def agent_run(request):
    return request.getfixturevalue(f"{request.param}_run")


@pytest.mark.slow
def test_tool_loop_compiles_times_and_submits(agent_run):
    ws, proc, summary, all_requests = agent_run
    requests = [r for r in all_requests if "## Parent candidate" not in r.prompt]  # the draft's
    assert len(requests) == 3, [r.json for r in requests]
    assert {"compile", "check", "time", "profile", "read_note", "submit"} <= set(requests[0].tools)
    assert requests[0].tool_results == []
    # The compiler's error went back to the model on the wire, as the tool's result ...
    (call_id, compiled), = requests[1].tool_results
    assert call_id and compiled.startswith("error at stage load")
    assert "undeclared_scale" in compiled
    # ... and so did real timings from the real harness, for the one case asked for.
    timed = dict(requests[2].tool_results)
    assert len(timed) == 2  # the transcript keeps the first result too
    last = [text for _, text in requests[2].tool_results][-1]
    assert "verdict: passed" in last and "case tail_1001: eager" in last
    assert "candidate" in last and "ms, speedup" in last and "n4096" not in last
    # The submitted candidate is a node, evaluated normally on every case.
    llm_nodes = [n for n in summary["nodes"] if n["operator"] == "llm"]
    assert len(llm_nodes) == 2 and llm_nodes[0]["stage"] == "accepted"  # the draft, improved
    assert llm_nodes[0]["fitness"] and llm_nodes[0]["fitness"] > 0
    assert "llm agent draft: one pass, no temporaries" in llm_nodes[0]["rationale"]
    # Tool evaluations are recorded, are not nodes, and do not count in --max-evals 2.
    tools = events(ws, summary["run_id"], "tool_evaluation")
    assert [(t["tool"], t["stop_after"], t["only_cases"]) for t in tools[:2]] == [
        ("compile", "load", ["n4096"]), ("time", None, ["tail_1001"])]
    assert tools[0]["result"]["stage"] == "load" and not tools[0]["result"]["accepted"]
    assert tools[1]["result"]["accepted"] and tools[1]["result"]["partial"]["only_cases"] == [
        "tail_1001"]
    assert len(tools) > 2  # the improvement's (below)
    assert len(summary["nodes"]) == 3  # the root and the two submitted candidates
    assert "evaluation budget" in summary["stop_reason"]
    # Every model call of the loop is an llm_call with its tool traffic, and counted.
    calls = events(ws, summary["run_id"], "llm_call")
    assert len(calls) == len(all_requests) and all(c["tools_mode"] == "native" for c in calls)
    assert [c["tool_calls"][0]["name"] for c in calls[:3]] == ["compile", "time", "submit"]
    assert calls[2]["messages"][-1]["role"] == "tool"
    assert "verdict: passed" in calls[2]["messages"][-1]["content"]
    assert summary["cost"]["tokens"] == len(all_requests) * 110
    # The improvement's first turn called two tools: both results went back on the wire.
    improving = [r for r in all_requests if "## Parent candidate" in r.prompt]
    assert len(improving[1].tool_results) == 2, improving[1].json
    assert not any(SECRET in json.dumps(c) for c in calls)
    assert "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.slow
def test_a_model_that_never_submits_is_cut_off(tmp_path):
    ws = tmp_path / "ws"
    reply = Reply(text="", tool_calls=[_call("read_note", title="no such note")])
    with ScriptedServer([reply]) as server:
        proc, summary = optimize(server, ws, "openai", "--agent-turns", "2", evals=3)
        requests = list(server.requests)
    failures = events(ws, summary["run_id"], "generation_failure")
    assert failures and all("no candidate submitted within 2 turns" in f["reason"]
                            for f in failures)
    assert len(requests) == 2 * len(failures)  # two turns per proposal, never a third
    assert "last turn" in requests[1].tool_results[-1][1]  # the model was told
    assert "no note titled 'no such note'" in requests[1].tool_results[-1][1]
    assert [n["operator"] for n in summary["nodes"]] == ["reference"]
    assert summary["funnel"]["generation"] == len(failures)
    assert proc.returncode not in (1, 2) and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_token_budget_counts_the_loop_and_stops_it(tmp_path):
    ws = tmp_path / "ws"
    reply = Reply(text="", tool_calls=[_call("read_note", title="x")], tokens_in=1000,
                  tokens_out=5)
    with ScriptedServer([reply]) as server:
        proc, summary = optimize(server, ws, "anthropic", "--agent-turns", "6",
                                 "--max-tokens", "2500", evals=3)
        requests = list(server.requests)
    assert len(requests) == 3  # the loop stopped at the budget, not after 6 turns
    failure, = events(ws, summary["run_id"], "generation_failure")
    assert "token budget reached" in failure["reason"]
    assert "token budget" in summary["stop_reason"]
    assert summary["cost"]["tokens"] == 3 * 1005


@pytest.mark.slow
def test_plain_text_fallback_when_the_server_rejects_tools(tmp_path):
    ws = tmp_path / "ws"
    block = json.dumps({"name": "compile", "arguments": {"source": BROKEN}})

    def handler(request: dict):
        results = [m for m in request["messages"] if "Result of tool" in str(m.get("content"))]
        if not results:
            return Reply(text=f"Trying it first.\n```tool\n{block}\n```\n")
        return Reply(text="Fixed.\n```python\n" + GOOD + "```\n")

    with ScriptedServer(handler=handler, reject_tools=True) as server:
        proc, summary = optimize(server, ws, "openai")
        requests = list(server.requests)
    assert requests[0].tools and all(not r.tools for r in requests[1:])
    assert len(requests) == 3
    assert "```tool" in requests[1].json["messages"][0]["content"]  # tools described in text
    compiled = requests[2].json["messages"][-1]["content"]
    assert compiled.startswith("Result of tool compile:\nerror at stage load")
    assert "undeclared_scale" in compiled
    calls = events(ws, summary["run_id"], "llm_call")
    assert "HTTP 400" in calls[0]["error"] and "without native tool calling" in calls[0]["error"]
    assert [c["tools_mode"] for c in calls] == ["native", "text", "text"]
    assert calls[1]["tool_calls"][0]["name"] == "compile"
    node = next(n for n in summary["nodes"] if n["operator"] == "llm")
    assert node["stage"] == "accepted"


@pytest.mark.slow
def test_converse_keeps_the_client_request_path(monkeypatch):
    """Retries, learned quirks and the transcript in the record apply to tool calls too."""
    from kernelevolve.llm import LLMClient, LLMConfig
    from kernelevolve.llm.tools import ToolSpec

    monkeypatch.setenv(KEY_VAR, SECRET)
    records = []
    script = [Reply(status=503),
              Reply(text="", tool_calls=[_call("compile", source="x")])]
    with ScriptedServer(script) as server:
        config = LLMConfig("openai", "m", base_url=server.openai_base_url, api_key_env=KEY_VAR,
                           retry_base_s=0.001)
        client = LLMClient(config, on_call=records.append)
        spec = ToolSpec("compile", "compile it", {"type": "object", "properties": {
            "source": {"type": "string"}}})
        messages = [{"role": "user", "content": "go"}]
        reply = asyncio.run(client.converse("sys", messages, [spec]))
        sent = server.requests[-1].json
    assert len(server.requests) == 2 and reply.attempts == 2
    assert reply.tool_calls[0].name == "compile" and reply.tool_calls[0].arguments == {
        "source": "x"}
    assert sent["tools"][0]["function"]["name"] == "compile"
    assert sent["messages"] == [{"role": "system", "content": "sys"},
                                {"role": "user", "content": "go"}]
    record, = records
    assert record.messages == messages and record.tool_calls[0]["name"] == "compile"
    assert dataclasses.asdict(record)["tools_mode"] == "native"


def test_restricted_evaluations_are_validated(evaluator, tmp_path):
    from kernelevolve.errors import UsageError
    from kernelevolve.harness.driver.evaluate import EvalOptions

    cand = tmp_path / "good.py"
    cand.write_text(GOOD)
    base = evaluator.options
    with pytest.raises(UsageError, match="unknown case 'nope'; the problem's cases: n4096, "
                                         "tail_1001"):
        evaluator.evaluate(PROBLEM, cand, options=dataclasses.replace(base, only_cases=("nope",)))
    with pytest.raises(UsageError, match="stop_after 'timing': choose one of load, integrity"):
        EvalOptions(stop_after="timing").validate()
    result = evaluator.evaluate(PROBLEM, cand, options=dataclasses.replace(
        base, only_cases=("tail_1001",), stop_after="integrity")).to_dict()
    assert result["accepted"] and not result["measured"] and result["fitness"] is None
    assert result["partial"] == {"only_cases": ["tail_1001"], "stopped_after": "integrity"}
    assert [c["name"] for c in result["cases"]] == ["tail_1001"]
    assert result["cases"][0]["correct"] is True


def _edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


FIRST_EDIT = _edit("y[i] = 2.0f * x[i] + 1.0f;", "y[i] = x[i] + x[i] + 1.0f;")
SECOND_EDIT = _edit("x = x.contiguous()", "x = x.contiguous()  # one pass")
THIRD_EDIT = _edit("y = torch.empty_like(x)", "y = torch.empty_like(x)  # no temporaries")


def agent_script(request: dict):
    """The draft: compile(BROKEN) -> time(GOOD) on one case -> submit(GOOD). The improvement
    of it times an edit against the parent, then an edit against that edited source, then
    submits a third edit."""
    from llm_servers import prompt_of

    turn = 1 + sum(1 for m in request["messages"] if m.get("role") == "assistant")
    if "## Parent candidate" not in prompt_of(request):
        calls = {1: [_call("compile", source=BROKEN)],
                 2: [_call("time", source=GOOD, case="tail_1001")],
                 3: [_call("submit", source=GOOD, rationale="one pass, no temporaries")]}
        return Reply(text="Let me try." if turn == 1 else "", tool_calls=calls.get(turn, calls[3]),
                     tokens_in=100, tokens_out=10)
    calls = {1: [_call("time", source=FIRST_EDIT, case="n4096"), _call("profile")],
             2: [_call("time", source=SECOND_EDIT, case="n4096")],
             3: [_call("submit", source=THIRD_EDIT, rationale="Change: x+x instead of 2x. "
                       + "A long rationale that must reach the record whole. " * 8 + "END")]}
    return Reply(text="", tool_calls=calls.get(turn, calls[3]), tokens_in=100, tokens_out=10)


def anthropic_script(request: dict):
    """agent_script's draft; the improvement compiles the first edit and reads a note in one
    turn, then submits the third edit."""
    from llm_servers import prompt_of

    if "## Parent candidate" not in prompt_of(request):
        return agent_script(request)
    turn = 1 + sum(1 for m in request["messages"] if m.get("role") == "assistant")
    calls = {1: [_call("compile", source=FIRST_EDIT), _call("read_note", title="x")],
             2: [_call("submit", source=THIRD_EDIT, rationale="Change: no temporaries")]}
    return Reply(text="", tool_calls=calls.get(turn, calls[2]), tokens_in=100, tokens_out=10)


@pytest.mark.slow
def test_paired_time_edits_against_the_last_source_and_tool_traffic_in_show(openai_run,
                                                                             tmp_path):
    import re

    import kernelevolve.operators.agent_timing as timing

    ws, _, summary, all_requests = openai_run
    requests = [r for r in all_requests if "## Parent candidate" in r.prompt]
    assert len(requests) == 3, [r.prompt[:200] for r in all_requests]
    # The system prompt fits tool use: no single-python-block answer format.
    system = requests[0].json.get("system") or requests[0].json["messages"][0]["content"]
    system = system if isinstance(system, str) else json.dumps(system)
    assert "## Tools (agent mode)" in system
    assert "SEARCH/REPLACE edits applied to the LAST" in system
    assert "single ```python" not in system and "ONE complete Python module" not in system
    assert "Begin your answer with" not in system
    # Turn 1: time, paired with the parent (timed again, interleaved), then profile after it.
    timed, profiled = [text for _, text in requests[1].tool_results]
    assert "verdict: passed" in timed, timed
    assert re.search(r"case n4096: [\d.]+x over eager \[[\d.]+-[\d.]+\]", timed), timed
    assert re.search(r"candidate / the parent \(node 1\): [\d.]+x \[[\d.]+-[\d.]+\]: ", timed)
    assert re.search(r"measured: candidate \d+ batches \(\d+ calls\); the parent \(node 1\) "
                     r"\d+ batches", timed), timed
    assert "nothing timed yet" not in profiled and "case n4096 figures:" in profiled
    assert "candidate / the parent (node 1)" in profiled  # what that time measured
    # Turn 2: the edit applied to the LAST source (the first edit's result), paired with it.
    second = requests[2].tool_results[-1][1]
    assert "verdict: passed" in second, second
    assert "candidate / your candidate of time call 1:" in second, second
    nodes = {n["id"]: n for n in summary["nodes"]}
    from kernelevolve.store import Store

    store = Store.open(ws)
    source = store.source(summary["run_id"], 2)
    assert "x[i] + x[i]" in source and "# one pass" in source and "# no temporaries" in source
    assert nodes[2]["stage"] == "accepted"
    # What was evaluated: each `time` ran the base and the candidate in turn, with the
    # paired timing settings; the base of the second is the first's candidate.
    tools = [t for t in events(ws, summary["run_id"], "tool_evaluation")[2:]  # the draft's: 2
             if t["tool"] == "time"]
    parent_hash = hashlib_of(GOOD)
    first_edit = hashlib_of(GOOD.replace("2.0f * x[i]", "x[i] + x[i]"))
    hashes = [t["source_hash"] for t in tools]
    assert hashes[:2] == [first_edit, parent_hash], hashes
    assert first_edit in hashes[2:4] and hashes.count(first_edit) >= 2
    assert all(t["timing"] == timing.TIMING for t in tools)
    # The transcript holds the edits, not a module per call.
    sent = json.dumps(requests[2].json)  # the prompt, the tool calls' arguments, the results
    assert sent.count("_lib.affine.restype = None") == 1, sent  # the parent's, in the prompt
    assert "y[i] = x[i] + x[i] + 1.0f;" in sent  # the edit, as sent
    # The whole rationale is kept, and the tool traffic shows in `show` and the report.
    traffic, = [e for e in events(ws, summary["run_id"], "agent_tools") if e["parent"] == 1]
    assert traffic["rationale"].endswith("END") and traffic["outcome"] == "submitted"
    shown = run_cli("show", summary["run_id"], "--workspace", str(ws))
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert "agent tool calls:" in out, out
    assert "proposal" in out and "from node 1, 3 turn(s), 4 call(s) -> node 2" in out, out
    assert re.search(r"time n4096: passed; [\d.]+x over eager \[[\d.]+-[\d.]+\]; [\d.]+x the "
                     r"parent \(node 1\) \[[\d.]+-[\d.]+\]; [\d.]+ s", out), out
    assert "profile n4096: passed" in out and "END" in out, out
    html = tmp_path / "r.html"
    assert run_cli("report", summary["run_id"], "--workspace", str(ws), "--html",
                   str(html)).returncode == 0
    assert "Agent tool calls" in html.read_text() and "time n4096: passed" in html.read_text()


def hashlib_of(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()
