"""The tool loop of one LLM proposal (`--agent`): the model tries candidates before it submits.

Each turn is one `client.converse` call (native tool calling, or the plain-text fallback: see
llm/tools.py), stored as an `llm_call` event with the transcript and the tool calls and
counted in the run's cost and token budgets like any call. Tool calls run in order
(operators/agent_tools.py); `submit`, or a final reply without tool calls that holds a module,
ends the loop with the candidate, which the engine then stores and evaluates as a node. A model
that has not submitted after `turns` turns, or a loop that reaches the run's cost or token
budget, ends as a `generation_failure` event: the proposal yields nothing, the run goes on.
"""
from __future__ import annotations

from dataclasses import dataclass
from string import Template
from typing import Any, Callable

from kernelevolve.operators.agent_tools import AgentTools, ToolEvaluate, specs
from kernelevolve.operators.base import Draft, ParentView, ProposalContext
from kernelevolve.operators.prompt import template
from kernelevolve.operators.reply import GenerationFailure, parse_reply

DEFAULT_TURNS = 6
LAST_TURN = ("\n\n(This is your last turn: call submit with your best candidate now, or answer "
             "with it in a ```python block.)")


@dataclass
class AgentSettings:
    evaluate: ToolEvaluate
    turns: int = DEFAULT_TURNS
    over_budget: Callable[[], str | None] = lambda: None  # the run's cost/token budget reached


class _Failed(Exception):
    """The loop ended without a candidate; the message is the generation failure's reason."""


async def propose(op: Any, settings: AgentSettings, ctx: ProposalContext,
                  parent: ParentView | None, system: str, user: str,
                  notes: list[Any], given: list[Any] = ()) -> Draft | None:
    """One proposal with tools; the same contract as LLMOperator._one."""
    from kernelevolve.llm import LLMError

    cases = [c.name for c in op.builder.problem.cases]
    system = system.rstrip() + "\n\n" + Template(template("agent")).safe_substitute(
        turns=settings.turns, cases=", ".join(f"`{c}`" for c in cases),
        default_case=f"`{cases[0]}`")
    tools = AgentTools(settings.evaluate, op.index, cases, parent)
    where = {"parent": parent.node_id if parent else None}
    messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
    model, mode, turn = "", None, 0
    try:
        for turn in range(1, settings.turns + 1):
            try:
                reply = await op.client.converse(system, messages, specs(), turn=turn)
            except LLMError as exc:
                op.failed(ctx, parent, exc)
                return None
            op.failed_in_row = 0
            model, mode = reply.model, reply.tools_mode
            done = await _turn(tools, messages, reply, parent, last=turn == settings.turns - 1)
            if done is not None:
                source, rationale = done
                draft = op.make_draft(parent, source, rationale, model, notes, given)
                draft.meta["agent"] = {"turns": turn, "tools": tools.used, "tools_mode": mode}
                return Draft(draft.source, draft.parents, draft.operator,
                             draft.rationale.replace("llm ", "llm agent ", 1), draft.meta)
            reason = settings.over_budget()
            if reason:
                raise _Failed(f"agent loop stopped after {turn} turn(s): {reason}")
        raise _Failed(f"agent loop: no candidate submitted within {settings.turns} turns "
                      f"(tools called: {', '.join(tools.used) or 'none'})")
    except _Failed as exc:
        ctx.report("generation_failure", {**where, "reason": str(exc), "model": model,
                                          "agent_turns": turn, "tools": tools.used})
        return None


async def _turn(tools: AgentTools, messages: list[dict[str, Any]], reply: Any,
                parent: ParentView | None, last: bool) -> tuple[str, str] | None:
    """Run one reply's tool calls, appending to the transcript; (source, rationale) to end."""
    calls = list(reply.tool_calls)
    if not calls:  # a plain final reply: it must hold the candidate
        try:
            return parse_reply(reply.text, parent.source if parent else None)
        except GenerationFailure as exc:
            raise _Failed(f"agent loop: a final reply without a candidate ({exc})") from None
    messages.append({"role": "assistant", "content": reply.text,
                     "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                    for c in calls]})
    for call in calls:
        if call.name == "submit" and not call.error:
            try:
                source = tools.source_of(call.arguments)
            except GenerationFailure as exc:
                result = f"error: {exc}; nothing was submitted"
            else:
                tools.used.append("submit")
                rationale = str(call.arguments.get("rationale") or "").strip()
                return source, " ".join(rationale.split())[:400]
        else:
            result = await tools.call(call)
        messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                         "content": result})
    if last:
        messages[-1]["content"] += LAST_TURN
    return None
