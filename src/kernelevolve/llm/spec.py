"""Which model to talk to, and how: `--llm PROVIDER:MODEL` plus the `LLMConfig` a run stores.

Why only two providers: the OpenAI chat-completions protocol is spoken by OpenAI itself and by
nearly every self-hosted or aggregating server (vLLM, Ollama, llama.cpp, OpenRouter, LiteLLM
proxy), so `openai` plus a `base_url` covers them all; `anthropic` is the one widely used API that
speaks its own protocol. More providers would be more code paths to keep honest, for no new reach.

`LLMConfig.to_dict()` is what a run writes into its store and reports, so it must never hold a
secret: it records the *name* of the environment variable that holds the key, never the key, and
strips credentials a user may have embedded in `base_url`.
"""
from __future__ import annotations

import dataclasses
import urllib.parse
from dataclasses import dataclass
from typing import Any

from kernelevolve.errors import UsageError

PROVIDERS = ("openai", "anthropic")

# The variable each provider's own SDK and docs use, so an existing setup works unchanged.
DEFAULT_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}

_SPEC_HELP = (f"expected PROVIDER:MODEL with PROVIDER one of {', '.join(PROVIDERS)} "
              "(e.g. openai:gpt-5, anthropic:claude-sonnet-4-5)")


def parse_llm_spec(spec: str) -> tuple[str, str]:
    """Split "openai:gpt-5" into ("openai", "gpt-5").

    Only the first colon separates: Ollama tags ("openai:llama3.1:8b") and OpenRouter names
    ("openai:anthropic/claude-sonnet-4.5") keep theirs in the model part.
    """
    if not isinstance(spec, str) or ":" not in spec:
        raise UsageError(f"bad --llm {spec!r}: {_SPEC_HELP}")
    provider, model = spec.split(":", 1)
    provider, model = provider.strip().lower(), model.strip()
    if provider not in PROVIDERS:
        raise UsageError(f"bad --llm {spec!r}: unknown provider {provider!r}; {_SPEC_HELP}")
    if not model:
        raise UsageError(f"bad --llm {spec!r}: no model named; {_SPEC_HELP}")
    return provider, model


def _redact_url(url: str | None) -> str | None:
    """Drop user:password@ from a URL; a proxy URL is the one place a key may hide in config."""
    if not url:
        return url
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=host))


def _seconds(value: Any, name: str) -> float:
    """A positive, finite number of seconds, or a one-line UsageError naming the setting."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not 0 < seconds < float("inf"):
        raise UsageError(f"{name} {value!r}: must be a positive number of seconds "
                         "(e.g. 600)")
    return seconds


@dataclass
class LLMConfig:
    """Everything needed to reach one model. Plain data: JSON-able, safe to store and report.

    temperature None means "send none; use the provider's default". max_output_tokens is sent
    as max_tokens (or max_completion_tokens for OpenAI reasoning models, where it also bounds
    the hidden reasoning tokens: 8192 leaves room for a kernel of a few hundred lines after a
    moderate amount of reasoning). retry_base_s / retry_cap_s shape the backoff between
    retries (see client.py); tests shrink the base so a retry costs milliseconds.

    timeout_s (`--llm-timeout`) is how long the server may send nothing: replies are streamed
    (llm/stream.py), so a slow model that keeps writing is never cut off, and the default leaves
    a loaded server minutes before its first token; with a server that cannot stream it bounds
    the wait for the whole reply. max_call_s caps one attempt, however steadily it streams.
    """

    provider: str
    model: str
    base_url: str | None = None
    api_key_env: str | None = None
    max_concurrency: int = 4
    timeout_s: float = 600.0
    max_call_s: float = 3600.0
    max_retries: int = 5
    temperature: float | None = 0.7
    max_output_tokens: int = 8192
    retry_base_s: float = 1.0
    retry_cap_s: float = 60.0
    max_failed_calls: int = 4    # calls in a row (each retried) that fail before the run stops

    def __post_init__(self) -> None:
        self.provider = str(self.provider).strip().lower()
        if self.provider not in PROVIDERS:
            raise UsageError(f"unknown LLM provider {self.provider!r}; {_SPEC_HELP}")
        if not str(self.model).strip():
            raise UsageError(f"no LLM model named; {_SPEC_HELP}")
        if self.max_concurrency < 1:
            raise UsageError(f"LLM max_concurrency must be >= 1, got {self.max_concurrency}")
        self.timeout_s = _seconds(self.timeout_s, "--llm-timeout")
        self.max_call_s = _seconds(self.max_call_s, "LLM max_call_s")
        if self.max_retries < 0:
            raise UsageError(f"LLM max_retries must be >= 0, got {self.max_retries}")
        if self.max_output_tokens < 1:
            raise UsageError(f"LLM max_output_tokens must be >= 1, got {self.max_output_tokens}")
        if self.max_failed_calls < 1:
            raise UsageError(f"--llm-max-failures {self.max_failed_calls}: must be at least 1")
        if self.retry_base_s < 0 or self.retry_cap_s < 0:
            raise UsageError("LLM retry_base_s and retry_cap_s must be >= 0")
        if self.api_key_env is not None and not str(self.api_key_env).strip():
            self.api_key_env = None

    @classmethod
    def from_spec(cls, spec: str, **kwargs: Any) -> "LLMConfig":
        """LLMConfig.from_spec("openai:gpt-5", base_url=...): the CLI's --llm plus its options."""
        provider, model = parse_llm_spec(spec)
        return cls(provider=provider, model=model, **kwargs)

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def key_env(self) -> str:
        """The environment variable the API key is read from."""
        return self.api_key_env or DEFAULT_KEY_ENV[self.provider]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able and secret-free: the key's variable *name* only, base_url without userinfo."""
        data = dataclasses.asdict(self)
        data["base_url"] = _redact_url(self.base_url)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LLMConfig":
        """Inverse of to_dict; also accepts {"llm": "openai:gpt-5", ...} as written in a run file.

        Unknown keys are an error (a typo such as "max_retry" must not silently do nothing).
        """
        data = dict(data)
        spec = data.pop("llm", None)
        if spec is not None:
            provider, model = parse_llm_spec(spec)
            data.setdefault("provider", provider)
            data.setdefault("model", model)
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise UsageError(f"unknown LLM config key(s) {', '.join(unknown)}; "
                             f"known: llm, {', '.join(sorted(names))}")
        if "provider" not in data or "model" not in data:
            raise UsageError(f"LLM config needs a provider and a model; {_SPEC_HELP}")
        return cls(**data)
