"""LLM providers for the universal operator: OpenAI-compatible servers and Anthropic.

    from kernelevolve.llm import LLMConfig, LLMClient
    client = LLMClient(LLMConfig.from_spec("openai:gpt-5"), on_call=store_call)
    completion = await client.complete(system_prompt, user_prompt)

The SDKs are an extra (`pip install 'kernelevolve[llm]'`); importing this package does not need
them, creating a client does.
"""
from kernelevolve.llm.client import PLACEHOLDER_KEY, LLMClient
from kernelevolve.llm.records import CallRecord, Completion, LLMError
from kernelevolve.llm.prices import cost_usd, price
from kernelevolve.llm.quirks import is_reasoning_model, request_params
from kernelevolve.llm.spec import DEFAULT_KEY_ENV, PROVIDERS, LLMConfig, parse_llm_spec

__all__ = [
    "CallRecord", "Completion", "DEFAULT_KEY_ENV", "LLMClient", "LLMConfig", "LLMError",
    "PLACEHOLDER_KEY", "PROVIDERS", "cost_usd", "is_reasoning_model", "parse_llm_spec", "price",
    "request_params",
]
