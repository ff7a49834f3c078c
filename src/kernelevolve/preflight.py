"""Checks made before a run is created or resumed, before any worker starts.

Each one turns a mistake that used to surface 15-30 s later (after the sandboxed workers
started), or as a run left `running` for ever, into a one-line error and exit code 2:

- the platform is known and usable here (`--platform cuda` on a machine without a GPU);
- the language asked of the LLM is one the platform runs (`--language fortran`);
- the LLM's API key is set (its variable is named, never its value), and its endpoint takes
  a TCP connection (nothing listening: refused or timed out, said with the address).

Reachability is a TCP connect, nothing more: no request is sent, so no key travels and no
provider is billed; a server that accepts connections and then fails is caught by the run's
own failed-call limit (operators/llm.py).
"""
from __future__ import annotations

import socket
import urllib.parse
from typing import Any

from kernelevolve import knobs
from kernelevolve.errors import PlatformError, UsageError

CONNECT_TIMEOUT_S = 5.0
DEFAULT_ENDPOINTS = {"openai": "https://api.openai.com/v1",
                     "anthropic": "https://api.anthropic.com"}


def check_run(config: Any) -> None:
    """Everything a run needs before it can start; raises a KernelevolveError naming the fault."""
    from kernelevolve.target import resolve

    target = resolve(config.platform)
    check_platform(target)
    if config.llm:
        from kernelevolve.llm import LLMConfig

        llm = LLMConfig.from_dict(config.llm)
        check_language(target, config.language)
        check_llm(llm)
    elif config.language is not None:
        check_language(target, config.language)


def check_platform(target: Any) -> None:
    """`target`: the run's resolved target.Target."""
    why = target.platform.unavailable_reason()
    if why:
        raise PlatformError(f"--platform {target.name}: {why}")


def check_language(target: Any, language: str | None) -> None:
    if language is None:
        return
    known = target.platform.languages
    if language not in known:
        raise UsageError(f"--language {language!r}: the {target.name} platform runs "
                         f"{', '.join(known)}; choose one of those")


def check_llm(llm: Any) -> None:
    """The key's variable is set (or a local server needs none); the endpoint accepts a
    connection."""
    if not knobs.secret(llm.key_env) and not (llm.base_url and llm.api_key_env is None):
        raise UsageError(f"no API key for {llm.spec}: set ${llm.key_env}"
                         + ("" if llm.api_key_env else
                            " (or name another variable with --llm-api-key-env)"))
    from kernelevolve.llm.spec import _redact_url

    url = llm.base_url or DEFAULT_ENDPOINTS[llm.provider]
    host, port = endpoint(url)
    url = _redact_url(url)
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        if isinstance(exc, socket.timeout):
            why = f"no answer in {CONNECT_TIMEOUT_S:g} s"
        raise UsageError(f"LLM endpoint {url} is not reachable ({host}:{port}: {why}); "
                         "start the server or fix --llm-base-url") from None


def endpoint(url: str) -> tuple[str, int]:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--llm-base-url {url!r}: expected http://HOST[:PORT]/... or https://...")
    try:
        port = parts.port
    except ValueError:
        raise UsageError(f"--llm-base-url {url!r}: the port is not a number") from None
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)
