"""LLM providers against local scripted servers (tests/llm_servers.py): never a real provider."""
from __future__ import annotations

import asyncio
import json
import pickle
import socket
import time

import pytest

from kernelevolve.errors import UsageError
from kernelevolve.llm import (CallRecord, LLMClient, LLMConfig, LLMError, cost_usd,
                              parse_llm_spec, request_params)
from kernelevolve.llm import prices, quirks
from kernelevolve.llm.retry import backoff_s, retry_after_s
from llm_env import isolate_llm_env
from llm_servers import Reply, ScriptedServer, prompt_of

KEY_ENV = "KE_TEST_OPENAI_KEY"
KEY = "sk-test-DO-NOT-LEAK-0123456789abcdef"
TEMPERATURE_400 = {"error": {"message": "Unsupported parameter: 'temperature' is not supported "
                             "with this model.", "type": "invalid_request_error"}}


@pytest.fixture(autouse=True)
def llm_env(monkeypatch):
    """A test key; provider keys removed; SDK default URLs pointed at a dead local port, so a
    test that forgot its base_url fails instead of reaching a real provider."""
    isolate_llm_env(monkeypatch, KEY_ENV, KEY)
    yield
    quirks.forget_learned()


def config(server: ScriptedServer, provider: str = "openai", model: str = "gpt-4o",
           **kw) -> LLMConfig:
    kw.setdefault("api_key_env", KEY_ENV)
    kw.setdefault("retry_base_s", 0.01)
    return LLMConfig(provider, model, base_url=server.base_url_for(provider), **kw)


def complete(cfg: LLMConfig, system: str = "You write kernels.", user: str = "Make it fast.",
             records: list | None = None):
    async def go():
        async with LLMClient(cfg, on_call=records.append if records is not None else None) as c:
            return await c.complete(system, user)
    return asyncio.run(go())


# -- spec and config ----------------------------------------------------------------------------

def test_parse_llm_spec():
    assert parse_llm_spec("openai:gpt-5") == ("openai", "gpt-5")
    assert parse_llm_spec("Anthropic:claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert parse_llm_spec("openai:llama3.1:8b") == ("openai", "llama3.1:8b")  # Ollama tag
    assert parse_llm_spec("openai:anthropic/claude-sonnet-4.5") == (
        "openai", "anthropic/claude-sonnet-4.5")  # OpenRouter name


@pytest.mark.parametrize("spec", ["gpt-5", "azure:gpt-5", "openai:", ":gpt-5", ""])
def test_parse_llm_spec_errors(spec):
    with pytest.raises(UsageError) as info:
        parse_llm_spec(spec)
    message = str(info.value)
    assert "\n" not in message
    assert "openai, anthropic" in message and "openai:gpt-5" in message


def test_config_round_trip_and_no_secrets():
    cfg = LLMConfig.from_spec("openai:gpt-5", base_url="https://user:s3cret@proxy.example/v1",
                              api_key_env="MY_KEY", temperature=None)
    data = cfg.to_dict()
    assert "s3cret" not in json.dumps(data)
    assert data["base_url"] == "https://proxy.example/v1" and data["api_key_env"] == "MY_KEY"
    back = LLMConfig.from_dict(data)
    assert (back.provider, back.model, back.temperature) == ("openai", "gpt-5", None)
    assert LLMConfig("anthropic", "m").key_env == "ANTHROPIC_API_KEY"
    assert LLMConfig.from_dict({"llm": "anthropic:claude-haiku-4-5"}).model == "claude-haiku-4-5"
    with pytest.raises(UsageError, match="max_retry"):
        LLMConfig.from_dict({"llm": "openai:gpt-5", "max_retry": 3})
    with pytest.raises(UsageError):
        LLMConfig("openai", "gpt-5", max_concurrency=0)


# -- round trips ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_openai_round_trip():
    records: list[CallRecord] = []
    with ScriptedServer([Reply(text="def kernel(): pass", tokens_in=1000, tokens_out=500)]) as s:
        out = complete(config(s), records=records)
    assert out.text == "def kernel(): pass" and out.finish_reason == "stop"
    assert (out.tokens_in, out.tokens_out, out.attempts) == (1000, 500, 1)
    assert out.cost_usd == pytest.approx((1000 * 2.50 + 500 * 10.00) / 1e6)
    req = s.requests[0]
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.json["messages"] == [{"role": "system", "content": "You write kernels."},
                                    {"role": "user", "content": "Make it fast."}]
    assert req.json["temperature"] == 0.7 and req.json["max_tokens"] == 8192
    assert len(records) == 1 and records[0].response == out.text and records[0].error is None
    assert records[0].cost_usd == out.cost_usd and records[0].system == "You write kernels."


@pytest.mark.slow
def test_anthropic_round_trip():
    records: list[CallRecord] = []
    with ScriptedServer([Reply(text="hello", tokens_in=2000, tokens_out=100)]) as s:
        out = complete(config(s, "anthropic", "claude-haiku-4-5"), records=records)
    assert (out.text, out.tokens_in, out.tokens_out) == ("hello", 2000, 100)
    assert out.finish_reason == "end_turn" and out.provider == "anthropic"
    assert out.cost_usd == pytest.approx((2000 * 1.0 + 100 * 5.0) / 1e6)
    req = s.requests[0]
    # anthropic 0.x sends x-api-key; 2.x sends "Authorization: Bearer".
    assert req.path == "/v1/messages" and KEY in (req.headers.get("x-api-key"),
                                                   req.headers.get("authorization", "")[7:])
    assert req.json["system"] == "You write kernels." and req.json["max_tokens"] == 8192
    assert req.json["messages"] == [{"role": "user", "content": "Make it fast."}]
    assert "You write kernels." in req.prompt and records[0].tokens_in == 2000


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_unknown_model_cost_is_none(provider):
    records: list[CallRecord] = []
    with ScriptedServer(["ok"]) as s:
        out = complete(config(s, provider, "my-local-model"), records=records)
    assert out.tokens_in and out.tokens_out and out.cost_usd is None
    assert records[0].cost_usd is None


def test_custom_base_url_without_key_uses_placeholder(monkeypatch):
    with ScriptedServer(["ok"]) as s:
        out = complete(config(s, api_key_env=None))  # default OPENAI_API_KEY is unset
    assert out.text == "ok" and s.requests[0].headers["authorization"] == "Bearer not-needed"


def test_missing_key_names_the_variable():
    with pytest.raises(LLMError, match=r"\$OPENAI_API_KEY"):
        LLMClient(LLMConfig("openai", "gpt-5"))
    with pytest.raises(LLMError, match=r"\$NOT_SET_KEY"):  # named explicitly: no placeholder
        LLMClient(LLMConfig("openai", "x", base_url="http://127.0.0.1:9/v1",
                            api_key_env="NOT_SET_KEY"))


# -- retries -------------------------------------------------------------------------------------

@pytest.mark.slow
def test_429_retry_after_then_success():
    with ScriptedServer([Reply(status=429, headers={"Retry-After": "1"}), Reply(text="ok")]) as s:
        out = complete(config(s))
    assert out.text == "ok" and out.attempts == 2
    waited = s.requests[1].arrived - s.requests[0].arrived
    assert 0.95 <= waited <= 1.8, waited


def test_500_then_success_anthropic():
    with ScriptedServer([Reply(status=500), Reply(text="ok")]) as s:
        out = complete(config(s, "anthropic", "claude-haiku-4-5"))
    assert out.text == "ok" and out.attempts == 2 and len(s.requests) == 2


@pytest.mark.slow
def test_timeout_then_success():
    with ScriptedServer([Reply(delay_s=5, text="too late"), Reply(text="ok")]) as s:
        start = time.monotonic()
        out = complete(config(s, timeout_s=0.5))
    assert out.text == "ok" and out.attempts == 2
    assert time.monotonic() - start < 4


def test_retries_exhausted():
    records: list[CallRecord] = []
    with ScriptedServer([Reply(status=503)]) as s:
        with pytest.raises(LLMError) as info:
            complete(config(s, max_retries=2), records=records)
    assert len(s.requests) == 3 and info.value.attempts == 3 and info.value.status == 503
    assert "after 3 attempts" in str(info.value) and "HTTP 503" in str(info.value)
    assert records[0].response is None and "HTTP 503" in records[0].error
    assert records[0].attempts == 3
    assert pickle.loads(pickle.dumps(info.value)).status == 503


def test_connection_refused_is_retried_then_fails():
    with socket.socket() as sock:  # a port with nothing listening
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = LLMConfig("openai", "gpt-4o", base_url=f"http://127.0.0.1:{port}/v1",
                    api_key_env=KEY_ENV, max_retries=1, retry_base_s=0.01)
    with pytest.raises(LLMError, match="after 2 attempts: connection"):
        asyncio.run(LLMClient(cfg).complete("s", "u"))


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_401_fails_at_once_naming_the_variable(provider):
    records: list[CallRecord] = []
    with ScriptedServer([Reply(status=401)]) as s:
        with pytest.raises(LLMError) as info:
            complete(config(s, provider, "m"), records=records)
    message = str(info.value)
    assert len(s.requests) == 1 and info.value.status == 401
    assert f"${KEY_ENV}" in message and KEY not in message and "\n" not in message
    assert KEY not in repr(records[0])


# -- quirks --------------------------------------------------------------------------------------

def test_temperature_rejection_is_learned():
    with ScriptedServer([Reply(status=400, body=TEMPERATURE_400), Reply(text="ok")]) as s:
        cfg = config(s, model="new-reasoner")
        client = LLMClient(cfg)

        async def twice():
            async with client:
                return [await client.complete("s", "u"), await client.complete("s", "u")]

        first, second = asyncio.run(twice())
    assert first.text == "ok" and first.attempts == 2 and second.attempts == 1
    assert s.requests[0].json["temperature"] == 0.7
    assert "temperature" not in s.requests[1].json
    assert "temperature" not in s.requests[2].json  # learned: omitted from the start
    assert quirks.NO_TEMPERATURE in quirks.learned("openai", "new-reasoner", cfg.base_url)


def test_max_tokens_rejection_is_learned():
    body = {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with "
                                 "this model. Use 'max_completion_tokens' instead."}}
    with ScriptedServer([Reply(status=400, body=body), Reply(text="ok")]) as s:
        out = complete(config(s, model="another-reasoner"))
    assert out.attempts == 2 and "max_tokens" not in s.requests[1].json
    assert s.requests[1].json["max_completion_tokens"] == 8192


def test_reasoning_model_params():
    with ScriptedServer(["ok"]) as s:
        complete(config(s, model="gpt-5"))
    body = s.requests[0].json
    assert "temperature" not in body and "max_tokens" not in body
    assert body["max_completion_tokens"] == 8192
    assert request_params("openai", "openai/o4-mini", 0.5, 100) == {"max_completion_tokens": 100}
    assert request_params("openai", "gpt-4o", None, 100) == {"max_tokens": 100}
    assert request_params("anthropic", "claude-sonnet-4-5", 0.2, 64) == {"max_tokens": 64}


def test_other_400_is_not_retried():
    body = {"error": {"message": "context length exceeded"}}
    with ScriptedServer([Reply(status=400, body=body)]) as s:
        with pytest.raises(LLMError, match="HTTP 400: context length exceeded"):
            complete(config(s))
    assert len(s.requests) == 1


# -- concurrency, secrets, loops -----------------------------------------------------------------

@pytest.mark.slow
def test_concurrency_limit():
    with ScriptedServer([Reply(delay_s=0.3, text="ok")]) as s:
        client = LLMClient(config(s, max_concurrency=2))

        async def many():
            async with client:
                return await asyncio.gather(*(client.complete("s", f"u{i}") for i in range(6)))

        outs = asyncio.run(many())
    assert [o.text for o in outs] == ["ok"] * 6
    assert s.max_in_flight == 2


def test_api_key_never_in_records_or_completions(monkeypatch):
    records: list[CallRecord] = []
    script = [Reply(text=f"echo {KEY}"), Reply(status=401, body={"error": {"message": KEY}}),
              Reply(status=500, body={"error": {"message": f"bad {KEY}"}})]
    with ScriptedServer(script) as s:
        cfg = config(s, max_retries=0)
        client = LLMClient(cfg, on_call=records.append)
        errors: list[str] = []

        async def calls():
            async with client:
                first = await client.complete("s", "u")
                for _ in range(2):
                    with pytest.raises(LLMError) as info:
                        await client.complete("s", "u")
                    errors.append(str(info.value))
                return first

        out = asyncio.run(calls())
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in s.requests)  # sent, yes
    assert out.text == "echo [redacted]"
    texts = [str(out), repr(out), repr(client), json.dumps(cfg.to_dict()), *errors]
    texts += [repr(r) + json.dumps(r.to_dict()) for r in records]
    assert len(records) == 3
    assert not [t for t in texts if KEY in t]


def test_client_survives_a_new_event_loop():
    with ScriptedServer(["a", "b"]) as s:
        client = LLMClient(config(s))  # the SDK client binds to a loop; a new loop gets a new one
        first = asyncio.run(client.complete("s", "u"))
        second = asyncio.run(client.complete("s", "u"))
        asyncio.run(client.aclose())  # bound to a finished loop: dropped, not an error
    assert (first.text, second.text) == ("a", "b")


def test_reply_without_choices_is_an_error():
    with ScriptedServer([Reply(body={"id": "x", "object": "chat.completion", "created": 0,
                                     "model": "m", "choices": []})]) as s:
        with pytest.raises(LLMError, match="no choices"):
            complete(config(s))


def test_handler_mode_answers_by_prompt():
    def handler(body):
        return "fixed" if "broken" in prompt_of(body) else Reply(text="fresh", tokens_out=7)

    with ScriptedServer(handler=handler) as s:
        assert complete(config(s), user="this is broken").text == "fixed"
        out = complete(config(s, "anthropic", "m"), user="new draft")
    assert out.text == "fresh" and out.tokens_out == 7


# -- pure helpers --------------------------------------------------------------------------------

def test_retry_after_parsing():
    assert retry_after_s({"Retry-After": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = "Wed, 21 Oct 2015 07:28:00 GMT"
    assert retry_after_s({"Retry-After": date}, now=1445412470.0) == pytest.approx(10.0)
    assert retry_after_s({"Retry-After": date}) == 0.0  # in the past
    assert retry_after_s({"Retry-After": "soon"}) is None and retry_after_s({}) is None


def test_backoff_bounds():
    for attempt in range(1, 12):
        wait = backoff_s(attempt, 1.0, 60.0)
        nominal = min(60.0, 2.0 ** (attempt - 1))
        assert nominal / 2 <= wait <= nominal
    assert 3.0 <= backoff_s(1, 1.0, 60.0, retry_after=3.0) <= 3.3
    assert backoff_s(1, 1.0, 60.0, retry_after=3600.0) == 60.0  # capped


def test_prices_and_user_override(tmp_path, monkeypatch):
    assert cost_usd("openai", "gpt-4o-2024-08-06", 10**6, 0) == pytest.approx(2.5)
    assert cost_usd("anthropic", "claude-sonnet-4-5-20250929", 0, 10**6) == pytest.approx(15.0)
    assert cost_usd("openai", "llama-3-70b", 10, 10) is None
    assert cost_usd("openai", "gpt-4o", None, 10) is None
    user = tmp_path / "prices.toml"
    user.write_text('[openai]\n"llama-3-70b" = { input = 0.5, output = 1.0 }\n'
                    '"gpt-4o" = { input = 0, output = 0 }\n')
    monkeypatch.setenv(prices.PRICES_ENV, str(user))
    assert cost_usd("openai", "llama-3-70b", 10**6, 10**6) == pytest.approx(1.5)
    assert cost_usd("openai", "gpt-4o", 10**6, 10**6) == 0.0  # the user's word, explicitly
    assert cost_usd("openai", "gpt-5", 10**6, 0) == pytest.approx(1.25)  # rest kept
    bad = tmp_path / "bad.toml"
    bad.write_text('[openai]\n"x" = { input = "cheap" }\n')
    monkeypatch.setenv(prices.PRICES_ENV, str(bad))
    with pytest.raises(UsageError, match="numeric input and output"):
        cost_usd("openai", "x", 1, 1)
