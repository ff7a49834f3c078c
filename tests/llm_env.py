"""The environment every LLM test runs in: a test key, no provider keys, dead default URLs."""
from __future__ import annotations

from typing import Any


def isolate_llm_env(monkeypatch: Any, key_env: str, key: str) -> None:
    """A test key in `key_env`; the providers' own keys removed; the SDKs' default URLs pointed
    at a dead local port, so a test that forgot its base_url fails instead of reaching a real
    provider; quirks learned by earlier tests forgotten."""
    from kernelevolve.llm import quirks

    monkeypatch.setenv(key_env, key)
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN",
                "KERNELEVOLVE_PRICES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    quirks.forget_learned()
