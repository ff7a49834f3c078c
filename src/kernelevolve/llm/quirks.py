"""Per-model request-parameter quirks, all in one place.

Why one module: providers keep changing which sampling parameters a model accepts, and the
failure is a 400 that no retry fixes. Scattering `if model.startswith(...)` through the client
would make every new model a hunt; here there is one table of known quirks, plus a small
in-process memory of quirks *learned* from a server's 400 reply (for models we have never heard
of, e.g. a new reasoning model behind an OpenAI-compatible proxy), so that only the first call
for such a model pays the extra round trip.

Known quirks:
- OpenAI reasoning models (o1*, o3*, o4*, gpt-5*) reject `temperature` (400 "Unsupported
  value") and reject `max_tokens` in favour of `max_completion_tokens`, which also bounds their
  hidden reasoning tokens.
- Anthropic requires `max_tokens` on every request, and gets no `temperature`: the current
  anthropic SDK (2.x) no longer has sampling parameters on `messages.create` (passing one is a
  TypeError before any request is made), so the provider's own sampling is used.
- Replies are streamed (llm/stream.py); a server that rejects `stream` or `stream_options`
  with a 400 naming it is learned (NO_STREAM) and sent plain requests from then on.
- Everything else speaking the OpenAI protocol (vLLM, Ollama, OpenRouter, LiteLLM) gets the
  classic `max_tokens`, which older self-hosted servers understand and newer ones still accept.
"""
from __future__ import annotations

import re

# Model-name families that are OpenAI reasoning models. Matched after dropping an aggregator's
# "vendor/" prefix, so "openai/gpt-5" through OpenRouter is recognised too.
_REASONING = re.compile(r"^(o1|o3|o4|gpt-5)([-.]|$)")

# Learned from servers: (provider, base_url or "", model) -> set of quirk names. Keyed by base
# URL as well as model because two servers can serve the same model name differently (a vLLM
# "gpt-5" clone is not OpenAI's), and so that tests on different local servers do not leak
# into each other.
_LEARNED: dict[tuple[str, str, str], set[str]] = {}

NO_TEMPERATURE = "no_temperature"
MAX_COMPLETION_TOKENS = "max_completion_tokens"
NO_STREAM = "no_stream"  # the server rejects `stream` (or `stream_options`): plain requests


def _bare(model: str) -> str:
    return model.rsplit("/", 1)[-1].lower()


def is_reasoning_model(provider: str, model: str) -> bool:
    """True for OpenAI reasoning models (o1*, o3*, o4*, gpt-5*), which reject temperature."""
    return provider == "openai" and bool(_REASONING.match(_bare(model)))


def _key(provider: str, model: str, base_url: str | None) -> tuple[str, str, str]:
    return (provider, (base_url or "").rstrip("/"), model)


def learned(provider: str, model: str, base_url: str | None = None) -> frozenset[str]:
    """Quirks learned at run time for this model on this server."""
    return frozenset(_LEARNED.get(_key(provider, model, base_url), ()))


def learn(provider: str, model: str, quirk: str, base_url: str | None = None) -> None:
    """Remember a quirk for the rest of this process (not persisted: a server may be upgraded)."""
    _LEARNED.setdefault(_key(provider, model, base_url), set()).add(quirk)


def forget_learned() -> None:
    """Clear the learned quirks (tests)."""
    _LEARNED.clear()


def request_params(provider: str, model: str, temperature: float | None,
                   max_output_tokens: int, *, base_url: str | None = None) -> dict:
    """The sampling/length parameters for one request, with every known and learned quirk applied.

    Returns keyword arguments for the SDK's create call (model and messages not included).
    """
    quirks = learned(provider, model, base_url)
    params: dict = {}
    if provider == "anthropic":
        params["max_tokens"] = max_output_tokens  # required by the Messages API
    elif is_reasoning_model(provider, model) or MAX_COMPLETION_TOKENS in quirks:
        params["max_completion_tokens"] = max_output_tokens
    else:
        params["max_tokens"] = max_output_tokens
    if (temperature is not None and provider != "anthropic" and NO_TEMPERATURE not in quirks
            and not is_reasoning_model(provider, model)):
        params["temperature"] = temperature
    return params


# Phrasings seen for a rejected parameter: OpenAI ("Unsupported parameter", "does not support"),
# pydantic-validated servers ("Extra inputs are not permitted"), others ("unrecognized").
_UNSUPPORTED = ("unsupported", "not supported", "does not support", "not permitted",
                "unrecognized", "unknown parameter")


def quirk_from_rejection(status: int | None, message: str, params: dict) -> str | None:
    """Which quirk a 400 reply reveals, if any, given the parameters that were sent.

    A rejected `temperature` ("Unsupported parameter: 'temperature' is not supported with this
    model.", "temperature ... does not support 0.7 ... Only the default (1) value is supported")
    -> NO_TEMPERATURE; a rejected `max_tokens` that asks for `max_completion_tokens` ->
    MAX_COMPLETION_TOKENS. None when the parameter was not sent (so we never loop).
    """
    if status != 400 or not message:
        return None
    text = message.lower()
    if "temperature" in params and "temperature" in text and any(u in text for u in _UNSUPPORTED):
        return NO_TEMPERATURE
    if "max_tokens" in params and "max_completion_tokens" in text:
        return MAX_COMPLETION_TOKENS
    return None


def rejects_stream(status: int | None, message: str) -> bool:
    """A 400 about the `stream` / `stream_options` we sent: the server cannot stream."""
    return status == 400 and "stream" in (message or "").lower()
