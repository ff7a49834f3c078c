"""The universal LLM operator: one operator whose prompt is synthesised from the live context.

Instead of fixed draft/debug/improve prompts, every call is built from the problem, the
target, the parent and its full evaluation, the search memory and notes retrieved from the
knowledge base (operators/prompt.py), chosen by the reference's ops and dtypes and the target
(knowledge/applies.py); each call is a fresh conversation, so every prompt carries the note
sections it needs in full. With no parent it drafts from the reference alone.
Replies that yield no usable candidate are reported as `generation_failure` events, failed
calls as `llm_error` events; `max_failed_calls` failed calls in a row (each one already retried
by the client) stop the run with the last error as the reason (OperatorFailing). With `agent`
settings (`--agent`), each proposal is a tool loop instead of one call (operators/agent.py).
"""
from __future__ import annotations

import asyncio
import re
from typing import Any

from kernelevolve.operators.base import Draft, OperatorFailing, ParentView, ProposalContext
from kernelevolve.operators.prompt import PromptBuilder
from kernelevolve.operators.reply import GenerationFailure, parse_reply

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_STOP = {"the", "and", "for", "with", "case", "trial", "output", "reference", "candidate",
         "forward", "return", "self", "torch", "tensor", "import", "class", "def", "model",
         "raised", "error", "line", "file"}


class LLMOperator:
    name = "llm"
    repairs = True       # it can read a rejection's reason and fix the candidate
    exhaustible = False  # an empty reply now says nothing about the next call

    def __init__(self, client: Any, builder: PromptBuilder, index: Any = None, *,
                 notes_k: int = 4, max_failed_calls: int | None = None, agent: Any = None):
        self.client, self.builder, self.index, self.notes_k = client, builder, index, notes_k
        self.agent = agent  # operators.agent.AgentSettings, or None: one call per proposal
        config = getattr(client, "config", None)
        self.max_failed_calls = max_failed_calls or getattr(config, "max_failed_calls", 4)
        self.failed_in_row, self.last_error = 0, ""

    async def propose(self, ctx: ProposalContext) -> list[Draft]:
        parents: list[ParentView | None] = list(ctx.parents) or [None]
        jobs = [parents[i % len(parents)] for i in range(max(1, ctx.want))]
        drafts = await asyncio.gather(*(self._one(ctx, parent, (i, len(jobs)))
                                        for i, parent in enumerate(jobs)))
        if self.failed_in_row >= self.max_failed_calls:
            raise OperatorFailing(f"{self.failed_in_row} LLM calls in a row failed; the last: "
                                  f"{self.last_error}")
        return [d for d in drafts if d is not None]

    async def _one(self, ctx: ProposalContext, parent: ParentView | None,
                   slot: tuple[int, int] = (0, 1)) -> Draft | None:
        from kernelevolve.llm import LLMError

        notes = self.retrieve(ctx, parent)
        one = ProposalContext(**{**ctx.__dict__, "parents": (parent,) if parent else ()})
        system, user = self.builder.build(one, notes, slot=slot)
        _, given = self.builder.knowledge(notes, self.builder.facts_for(one))
        notes = [h for h in notes if any(s.note_id == h.note.id for s in given)] or notes
        if self.agent is not None:
            from kernelevolve.operators.agent import propose

            return await propose(self, self.agent, ctx, parent, system, user, notes, given)
        try:
            completion = await self.client.complete(system, user)
        except LLMError as exc:
            self.failed(ctx, parent, exc)
            return None
        self.failed_in_row = 0
        try:
            source, rationale = parse_reply(completion.text, parent.source if parent else None)
        except GenerationFailure as exc:
            ctx.report("generation_failure", {"parent": parent.node_id if parent else None,
                                              "reason": str(exc), "model": completion.model})
            return None
        return self.make_draft(parent, source, rationale, completion.model, notes, given)

    @staticmethod
    def make_draft(parent: ParentView | None, source: str, rationale: str, model: str,
                   notes: list[Any], given: list[Any] = ()) -> Draft:
        """The node-to-be: `change` is the model's one-line `Change:` summary (the history
        table's description), `note_sections` the knowledge sections its prompt carried."""
        mode = "improve" if parent else "draft"
        change = change_line(rationale)
        return Draft(source=source, parents=(parent.node_id,) if parent else (),
                     operator="llm", rationale=f"llm {mode}: {rationale}"[:500],
                     meta={"llm_model": model, "change": change,
                           "notes": [h.note.id for h in notes],
                           "note_sections": [s.key for s in given]})

    def failed(self, ctx: ProposalContext, parent: ParentView | None, exc: Exception) -> None:
        """A call that failed for good (already retried): an `llm_error` event, counted. An
        auth error (401, 403) stops the run at once: no later call can succeed with this key."""
        self.failed_in_row += 1
        self.last_error = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
        ctx.report("llm_error", {"parent": parent.node_id if parent else None,
                                 "error": str(exc), "in_row": self.failed_in_row})
        if getattr(exc, "status", None) in (401, 403):
            raise OperatorFailing(self.last_error)  # names the key's variable, never the key

    def retrieve(self, ctx: ProposalContext, parent: ParentView | None) -> list[Any]:
        """Notes for the reference's ops and dtypes, after any note an earlier run learned on
        this very problem (its title starts with the problem's name: learning.py)."""
        if self.index is None:
            return []
        target = dict(platform=self.builder.platform, language=self.builder.language,
                      fingerprint=ctx.fingerprint)
        name = self.builder.problem.name
        own = [h for h in self.index.search(name, k=20, **target)
               if h.note.source == "learned" and h.note.title.startswith(f"{name}:")][:2]
        hits = self.index.search(self.query(ctx, parent), k=self.notes_k, **target)
        return own + [h for h in hits if h.note.id not in {o.note.id for o in own}]

    def query(self, ctx: ProposalContext, parent: ParentView | None) -> str:
        """Words that say what this kernel is (the reference's ops and their classes, its
        dtypes: not the problem's name) and what is going wrong with it."""
        one = ProposalContext(**{**ctx.__dict__, "parents": (parent,) if parent else ()})
        words = self.builder.facts_for(one).terms()
        result = (parent.result if parent else None) or {}
        if parent is not None and parent.stage and parent.stage != "accepted":
            words.append(parent.stage)
            words.extend(_WORD.findall((result.get("reason") or parent.reason or "")[:300]))
        seen, out = set(), []
        for word in words:
            w = word.lower()
            if w not in seen and w not in _STOP:
                seen.add(w)
                out.append(w)
        return " ".join(out[:32])


_CHANGE = re.compile(r"^\W*change\W*:\s*(.+)$", re.I | re.M)


def change_line(rationale: str) -> str:
    """The `Change: ...` line the system prompt asks for, else the rationale's first sentence."""
    found = _CHANGE.search(rationale or "")
    text = found.group(1) if found else (rationale or "").split(". ")[0]
    return " ".join(text.split())[:160].rstrip(".")

