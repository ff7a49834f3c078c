"""Operator registry: names to factories; an unknown name lists what is registered."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kernelevolve.errors import UsageError
from kernelevolve.operators.base import Operator


@dataclass
class OperatorDeps:
    """What operator factories may need from the run (the LLM ones need a client)."""

    problem_path: str = ""
    # The run's resolved target (target.Target), or a platform's name: "cpu" is the default
    # (config.py has the same default).
    platform: Any = "cpu"
    language: str | None = None
    llm_client: Any = None
    knowledge: Any = None
    agent: Any = None  # operators.agent.AgentSettings (`--agent`): the LLM's tool loop


def _tune(deps: OperatorDeps) -> Operator:
    from kernelevolve.operators.tune import TuneOperator

    return TuneOperator()


def _llm(deps: OperatorDeps) -> Operator:
    from kernelevolve.operators.llm import LLMOperator
    from kernelevolve.operators.prompt import PromptBuilder
    from kernelevolve.target import as_target

    if deps.llm_client is None:
        raise UsageError("--operator llm needs a model: pass --llm PROVIDER:MODEL "
                         "(e.g. openai:gpt-5 or anthropic:claude-sonnet-4-5)")
    target = as_target(deps.platform)
    language = deps.language or target.language_name
    builder = PromptBuilder(deps.problem_path, target, language)
    return LLMOperator(deps.llm_client, builder, deps.knowledge, agent=deps.agent)


def _synth(deps: OperatorDeps) -> Operator:
    from kernelevolve.operators.synth import SynthOperator

    return SynthOperator(deps.problem_path, deps.platform)


FACTORIES: dict[str, Callable[[OperatorDeps], Operator]] = {"tune": _tune, "llm": _llm,
                                                            "synth": _synth}


def check_names(names: list[str]) -> None:
    unknown = [n for n in names if n not in FACTORIES]
    if unknown:
        raise UsageError(f"unknown operator {unknown[0]!r}; registered operators: "
                         f"{', '.join(sorted(FACTORIES))}")


def make_operators(names: list[str], deps: OperatorDeps | None = None) -> list[Operator]:
    check_names(names)
    deps = deps or OperatorDeps()
    return [FACTORIES[n](deps) for n in dict.fromkeys(names)]
