"""Every LLM call accounted for: streamed replies with an idle timeout, timeouts and re-sends
counted and shown as what they are, never two attempts of one call in flight, and an auth error
that stops a run at once. Both protocols, against tests/llm_servers.py (real HTTP on loopback)."""
from __future__ import annotations

import asyncio
import json

import pytest

from conftest import PROBLEMS, run_cli
from kernelevolve.errors import UsageError
from kernelevolve.llm import LLMClient, LLMConfig, LLMError, quirks
from kernelevolve.llm.tools import ToolSpec
from kernelevolve.report.summary import calls_line, llm_cost
from kernelevolve.run_hooks import CostMeter
from kernelevolve.store import Store
from llm_env import isolate_llm_env
from llm_servers import Reply, ScriptedServer

KEY_ENV = "KE_TEST_CALLS_KEY"
KEY = "sk-test-calls-DO-NOT-LEAK-0123456789"
PROVIDERS = ["openai", "anthropic"]
# An answer long enough to arrive in many pieces.
ANSWER = "Change: fuse the passes.\n```python\n" + "x = 1\n" * 60 + "```"


@pytest.fixture(autouse=True)
def llm_env(monkeypatch):
    isolate_llm_env(monkeypatch, KEY_ENV, KEY)
    yield
    quirks.forget_learned()


def config(server: ScriptedServer, provider: str, **kw) -> LLMConfig:
    kw.setdefault("retry_base_s", 0.01)
    return LLMConfig(provider, "test-model", base_url=server.base_url_for(provider),
                     api_key_env=KEY_ENV, **kw)


def complete(cfg: LLMConfig, records: list, on_call=None):
    async def go():
        async with LLMClient(cfg, on_call=on_call or records.append) as client:
            return await client.complete("You write kernels.", "Make it fast.")
    return asyncio.run(go())


# -- the timeout's setting ----------------------------------------------------------------------

def test_default_timeout_leaves_a_slow_server_minutes():
    cfg = LLMConfig("openai", "gpt-4o")
    assert cfg.timeout_s >= 300  # was 120 s: four answers were thrown away at that
    assert cfg.max_call_s >= cfg.timeout_s


@pytest.mark.parametrize("value", [0, -5, "soon", float("inf"), float("nan")])
def test_bad_timeout_is_a_one_line_usage_error(value):
    from kernelevolve.config import build_config

    with pytest.raises(UsageError) as info:
        build_config(None, {"llm": "openai:gpt-4o", "llm_timeout": value})
    message = str(info.value)
    assert "--llm-timeout" in message and "positive number of seconds" in message
    assert "\n" not in message


def test_timeout_flag_reaches_the_run_config():
    from kernelevolve.config import build_config

    config = build_config(None, {"llm": "anthropic:claude-haiku-4-5", "llm_timeout": 900.0})
    assert config.llm["timeout_s"] == 900.0


# -- a slow server is waited for ------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_answer_streamed_past_the_old_timeout_is_used_once(provider):
    """The server writes its answer over about 4 s, a piece every 0.3 s; the client's idle
    timeout is 1.5 s, and the old whole-request limit (timeout + 1 s) would have cut it off at
    2.5 s and sent it again."""
    records: list = []
    with ScriptedServer([Reply(text=ANSWER, chunks=10, chunk_delay_s=0.3)]) as s:
        out = complete(config(s, provider, timeout_s=1.5), records)
        requests = list(s.requests)
    assert len(requests) == 1 and requests[0].streamed and not requests[0].abandoned
    assert requests[0].finished - requests[0].arrived > 2.5  # past the old limit
    assert out.text == ANSWER and out.attempts == 1 and out.retries == ()
    record, = records
    assert record.streamed and record.timeouts == 0 and record.retries == []
    assert record.tokens_in and record.tokens_out == len(ANSWER) // 4  # usage from the stream
    assert record.response == ANSWER


@pytest.mark.parametrize("provider", PROVIDERS)
def test_streamed_tool_calls_arrive_whole(provider):
    spec = ToolSpec("compile", "compile it", {"type": "object", "properties": {
        "source": {"type": "string"}}})
    source = "import torch\n" * 20
    with ScriptedServer([Reply(text="", chunks=5, tool_calls=[
            {"name": "compile", "arguments": {"source": source}}])]) as s:
        async def go():
            async with LLMClient(config(s, provider)) as client:
                return await client.converse("sys", [{"role": "user", "content": "go"}], [spec])
        reply = asyncio.run(go())
        assert s.requests[0].streamed
    call, = reply.tool_calls
    assert call.name == "compile" and call.arguments == {"source": source} and not call.error
    assert reply.finish_reason in ("tool_calls", "tool_use")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_server_that_cannot_stream_is_learned_and_asked_plainly(provider):
    records: list = []
    with ScriptedServer([Reply(text="plain answer")], reject_stream=True) as s:
        cfg = config(s, provider)
        first = complete(cfg, records)
        second = complete(cfg, records)
        sent = [r.streamed for r in s.requests]
    assert first.text == second.text == "plain answer"
    assert sent == [True, False, False]  # learned once, then plain from the start
    assert [r["why"] for r in records[0].retries] == ["re-sent without streaming"]
    assert records[1].retries == [] and records[1].streamed is False
    assert first.tokens_in and first.tokens_out


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_server_that_ignores_stream_is_read_whole(provider):
    records: list = []
    with ScriptedServer([Reply(text="whole answer", tokens_in=7, tokens_out=3)],
                        ignore_stream=True) as s:
        out = complete(config(s, provider), records)
        assert [r.streamed for r in s.requests] == [True]
    assert out.text == "whole answer" and (out.tokens_in, out.tokens_out) == (7, 3)
    assert out.attempts == 1 and records[0].error is None


def test_an_overloaded_error_mid_stream_is_retried_as_what_it_is():
    """Anthropic reports overload in the middle of a streamed answer as an error event after a
    200: that is a 529, retried, not a broken reply given up on."""
    records: list = []
    with ScriptedServer([Reply(text=ANSWER, chunks=4, stream_error="overloaded_error"),
                         Reply(text=ANSWER)]) as s:
        out = complete(config(s, "anthropic"), records)
        assert len(s.requests) == 2
    assert out.text == ANSWER and out.attempts == 2
    assert [(r["why"], r["detail"]) for r in records[0].retries] == [
        ("HTTP 529", "HTTP 529: scripted overloaded_error")]


# -- a silent server: timeouts counted, one attempt at a time ------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_silent_server_times_out_as_a_timeout_one_attempt_at_a_time(provider, tmp_path):
    with Store.open(tmp_path / "ws") as store:
        run = store.create_run("run-0001", problem_path="p.py", problem_hash="p" * 64,
                               platform="cpu", config={}, fingerprint={})
        meter = CostMeter(store, run.id)
        records: list = []

        def keep(call):
            records.append(call)
            meter.record(call)
        script = [Reply(delay_s=60), Reply(status=529), Reply(status=529), Reply(status=529),
                  Reply(text="ok")]
        with ScriptedServer(script) as s:
            cfg = config(s, provider, timeout_s=0.5, max_retries=1)
            with pytest.raises(LLMError) as info:  # a timeout, then a 529: retries spent
                complete(cfg, records, keep)
            requests = list(s.requests)
            out = complete(config(s, provider, timeout_s=0.5, max_retries=2), records, keep)
            in_flight = s.max_in_flight
        cost = llm_cost(store, run.id)
        stored = [e.data for e in store.events(run.id, "llm_call")]
    assert "HTTP 529" in str(info.value)
    assert len(requests) == 2 and requests[0].abandoned  # the client hung up, then re-sent
    assert in_flight == 1  # never two attempts of one call at the server at once
    failed, answered = records
    assert failed.timeouts == 1 and failed.failure == "HTTP 529"
    assert [r["why"] for r in failed.retries] == ["timeout after 0.5 s"]
    assert out.text == "ok" and [r["why"] for r in answered.retries] == ["HTTP 529", "HTTP 529"]
    assert stored[0]["retries"][0]["why"] == "timeout after 0.5 s" and stored[0]["timeouts"] == 1
    line = calls_line(cost)
    assert line == ("LLM: 2 calls, 1 failed (1 HTTP 529); 2 retried (3 re-sends: 2 HTTP 529, "
                    "1 timeout after 0.5 s)")


def test_calls_line_never_hides_retries_behind_0_failed():
    cost = {"by_model": {"openai:m": {"calls": 12, "failed": 0, "retried": 2, "why_failed": {},
                                      "resent": {"timeout after 600 s": 1, "HTTP 529": 1}}}}
    assert calls_line(cost) == ("LLM: 12 calls, 0 failed; 2 retried (1 timeout after 600 s, "
                                "1 HTTP 529)")
    assert calls_line({"by_model": {}}) is None
    quiet = {"by_model": {"anthropic:m": {"calls": 1, "failed": 0, "retried": 0}}}
    assert calls_line(quiet) == "LLM: 1 call, 0 failed; 0 retried"


# -- an auth error stops the run at once ---------------------------------------------------------

@pytest.mark.slow
def test_a_401_stops_the_run_at_once_naming_the_key_variable(tmp_path):
    """One protocol: each protocol's 401 is an LLMError with status 401 that names the key
    variable (test_llm.py's test_401_fails_at_once_naming_the_variable), and from there the
    run's stop does not depend on the protocol."""
    provider = "openai"
    ws = tmp_path / "ws"
    with ScriptedServer([Reply(status=401)]) as s:
        proc = run_cli("optimize", str(PROBLEMS / "softmax_unfused.py"), "--operator", "llm",
                       "--llm", f"{provider}:test-model", "--llm-base-url",
                       s.base_url_for(provider), "--llm-api-key-env", KEY_ENV,
                       "--llm-max-failures", "4", "--max-evals", "6", "--workspace", str(ws),
                       "--json", str(ws / "s.json"), "--no-compile-figures",
                       env={KEY_ENV: KEY}, timeout=600)
        requests = list(s.requests)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 5, out  # stopped by failures
    assert len(requests) == 1, out  # not --llm-max-failures calls: the first 401 stops it
    summary = json.loads((ws / "s.json").read_text())
    assert "HTTP 401" in summary["stop_reason"] and f"${KEY_ENV}" in summary["stop_reason"]
    assert "401" in out and KEY_ENV in out and KEY not in out
    assert "1 failed (1 HTTP 401)" in out
