"""The run's side of the LLM's tool loop (`--agent`): how a tool call is evaluated and when
the loop must stop for the run's budgets (operators/agent.py holds the loop itself)."""
from __future__ import annotations

import dataclasses
import hashlib
from typing import TYPE_CHECKING, Any

from kernelevolve.errors import InfraError, UsageError

if TYPE_CHECKING:
    from kernelevolve.operators.agent import AgentSettings
    from kernelevolve.run import Run


def agent_settings(run: "Run", executor, problem, meter) -> "AgentSettings":
    """The LLM's tool loop (`--agent`): tool evaluations go through the same executor (so
    the same sandbox and gates) as nodes, restricted to one case; each is recorded as a
    `tool_evaluation` event, never becomes a node and never counts toward --max-evals."""
    from kernelevolve.candidate_file import Candidate
    from kernelevolve.harness.protocol.timing import TimingPolicy
    from kernelevolve.operators.agent import AgentSettings

    budgets = run.config.budgets
    folder = run._dir() / "tools"

    async def evaluate(source: str, tool: str, only_cases: tuple, stop_after: str | None,
                       timing: dict[str, Any] | None = None) -> dict[str, Any]:
        digest = hashlib.sha256(source.encode()).hexdigest()
        path = folder / f"{digest[:16]}.py"
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        options = dataclasses.replace(run._search_options, only_cases=tuple(only_cases),
                                      stop_after=stop_after)
        if timing:  # the agent's paired `time` (operators/agent_timing.py)
            options = dataclasses.replace(options, timing=TimingPolicy(**timing))
        try:
            result = (await executor.evaluate(problem, Candidate(source, str(path)),
                                              options)).to_dict()
        except (InfraError, UsageError) as exc:
            result = {"error": str(exc)}
        run.store.add_event(run.id, "tool_evaluation", {
            "tool": tool, "source_hash": digest, "path": str(path),
            "only_cases": list(only_cases), "stop_after": stop_after, "timing": timing,
            "result": result})
        return result

    def over_budget() -> str | None:
        if budgets.max_cost is not None and meter.cost_usd >= budgets.max_cost:
            return f"cost budget reached (${budgets.max_cost:g})"
        if budgets.max_tokens is not None and meter.tokens >= budgets.max_tokens:
            return f"token budget reached ({budgets.max_tokens} tokens)"
        return None

    return AgentSettings(evaluate=evaluate, turns=run.config.agent_turns,
                         over_budget=over_budget)
