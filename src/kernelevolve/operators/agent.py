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

import hashlib
import itertools
import re
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
SUPERSEDED = "(a whole module sent earlier, replaced by a later one: edits apply to the last)"
RATIONALE_CHARS = 2000  # the submit rationale kept whole in the node's meta and the event
_PROPOSALS = itertools.count(1)


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
    system = agent_system(system, settings.turns, cases)
    tools = AgentTools(settings.evaluate, op.index, cases, parent)
    where = {"parent": parent.node_id if parent else None}
    proposal = next(_PROPOSALS)
    messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
    model, mode, turn = "", None, 0
    try:
        for turn in range(1, settings.turns + 1):
            try:
                reply = await op.client.converse(system, messages, specs(), turn=turn)
            except LLMError as exc:
                op.failed(ctx, parent, exc)
                if tools.log:  # what the tools did before the call failed
                    ctx.report("agent_tools", {**where, "proposal": proposal, "turns": turn,
                                               "outcome": "failed", "calls": tools.log,
                                               "reason": f"LLM call failed: {exc}"[:300]})
                return None
            op.failed_in_row = 0
            model, mode = reply.model, reply.tools_mode
            done = await _turn(tools, messages, reply, parent, last=turn == settings.turns - 1)
            if done is not None:
                source, rationale = done
                draft = op.make_draft(parent, source, rationale[:400], model, notes, given)
                draft.meta["agent"] = {"turns": turn, "tools": tools.used, "tools_mode": mode,
                                       "rationale": rationale, "proposal": proposal}
                ctx.report("agent_tools", {**where, "proposal": proposal, "turns": turn,
                                           "outcome": "submitted", "calls": tools.log,
                                           "rationale": rationale, "source_hash": hashlib.sha256(
                                               source.encode()).hexdigest()})
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
        ctx.report("agent_tools", {**where, "proposal": proposal, "turns": turn,
                                   "outcome": "failed", "reason": str(exc), "calls": tools.log})
        return None


def agent_system(system: str, turns: int, cases: list[str]) -> str:
    """The plain system prompt without its answer format, then the tools (agent.md)."""
    for name in ("answer-edit", "answer-module"):
        system = system.replace(template(name).strip(), "")
    # "Begin your answer with `Change:` ... then the code": in agent mode that is submit's
    # rationale (agent.md), not the shape of every reply
    system = re.sub(r"\n\s*Begin your answer with[^\n]*(\n[^\n]+)*", "", system)
    return system.rstrip() + "\n\n" + Template(template("agent")).safe_substitute(
        turns=turns, cases=", ".join(f"`{c}`" for c in cases), default_case=f"`{cases[0]}`")


async def _turn(tools: AgentTools, messages: list[dict[str, Any]], reply: Any,
                parent: ParentView | None, last: bool) -> tuple[str, str] | None:
    """Run one reply's tool calls, appending to the transcript; (source, rationale) to end.
    Calls run in order, except that a `profile` without a source runs after the reply's
    `time` calls (it asks about what was timed); results go back in the order asked."""
    calls = list(reply.tool_calls)
    if not calls:  # a plain final reply: it must hold the candidate
        try:
            return parse_reply(reply.text, tools.last_source)
        except GenerationFailure as exc:
            raise _Failed(f"agent loop: a final reply without a candidate ({exc})") from None
    _shorten_modules(messages, calls)
    messages.append({"role": "assistant", "content": reply.text,
                     "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                                    for c in calls]})
    results: dict[int, str] = {}
    timed = any(c.name == "time" for c in calls)
    later = [i for i, c in enumerate(calls) if timed and c.name == "profile"
             and not (c.arguments or {}).get("source")]
    for i in [i for i in range(len(calls)) if i not in later] + later:
        call = calls[i]
        if call.name == "submit" and not call.error:
            try:
                source = tools.source_of(call.arguments)
            except GenerationFailure as exc:
                results[i] = f"error: {exc}; nothing was submitted"
                tools.log.append({"tool": "submit", "verdict": "error", "error": str(exc)[:200]})
                continue
            tools.used.append("submit")
            tools.log.append({"tool": "submit", "verdict": "submitted"})
            rationale = str(call.arguments.get("rationale") or "").strip()
            return source, " ".join(rationale.split())[:RATIONALE_CHARS]
        results[i] = await tools.call(call)
    for i, call in enumerate(calls):
        messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                         "content": results[i]})
    if last:
        messages[-1]["content"] += LAST_TURN
    return None


def _shorten_modules(messages: list[dict[str, Any]], calls: list[Any]) -> None:
    """When this reply sends a whole module, earlier whole-module arguments are shortened:
    edits apply to the last source, so the transcript needs one module, not one per call."""
    if not any(_whole(c.arguments) for c in calls):
        return
    for k, message in enumerate(messages):  # new objects: recorded transcripts stay as sent
        if any(_whole(c.get("arguments")) for c in message.get("tool_calls") or []):
            messages[k] = {**message, "tool_calls": [
                {**c, "arguments": {**c["arguments"], "source": SUPERSEDED}}
                if _whole(c.get("arguments")) else c for c in message["tool_calls"]]}


def _whole(args: Any) -> bool:
    text = args.get("source") if isinstance(args, dict) else None
    return isinstance(text, str) and "ModelNew" in text and "<<<<<<<" not in text
