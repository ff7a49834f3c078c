"""The search loop: propose, deduplicate, evaluate concurrently, select, stop.

Proposals and evaluations run as asyncio tasks, at most `max_in_flight` at a time. The engine
owns no storage and no evaluator: `SearchHooks` persists what happens (so a killed run can be
resumed), `evaluate` measures a node. Pending nodes found in the graph at start (a resumed run)
are evaluated first; nothing already evaluated is evaluated again. How many drafts are written
from the reference, and when a failed one is repaired instead, is search/drafting.py's rule.
"""
from __future__ import annotations

import asyncio
import hashlib
import random
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Protocol

from kernelevolve import interrupts
from kernelevolve.errors import InfraError
from kernelevolve.operators.base import (Draft, Operator, OperatorFailing, ParentView,
                                         ProposalContext, check_operator)
from kernelevolve.search.drafting import draft_cap, next_step, repairable
from kernelevolve.search.graph import ROOT, Node, SearchGraph
from kernelevolve.search.memory import fitness_interval
from kernelevolve.search.policies import Policy
from kernelevolve.search.termination import Budgets, Progress, should_stop
from kernelevolve.types import EvalResult


MAX_EMPTY_ROUNDS = 6  # consecutive proposal rounds with nothing usable before giving up
MAX_EARLIER_DRAFTS = 6  # root children shown to a new draft
STOPPED_BY_FAILURES = "stopped by failures"  # how a stop reason starts when an operator failed


class SearchHooks(Protocol):
    def add_node(self, draft: Draft) -> Node: ...
    def record(self, node: Node, result: EvalResult, wall_s: float) -> None: ...
    def infra_failure(self, node: Node, reason: str) -> None: ...
    def event(self, kind: str, data: dict[str, Any]) -> None: ...
    def source(self, node_id: int) -> str: ...
    def result(self, node_id: int) -> EvalResult | None: ...


Evaluate = Callable[[Node, str], Awaitable[EvalResult]]


def _as_data(result: EvalResult | None) -> dict[str, Any]:
    """A result as operators read it: JSON data, as the LLM and the agent's tools see it."""
    return result.to_dict() if result is not None else {}


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


@dataclass
class EngineConfig:
    max_in_flight: int = 2
    # At most this many drafts from the reference by a stochastic operator (an LLM), and at
    # most a third of --max-evals, before the search expands; fewer when one beats the
    # baseline (search/drafting.py).
    draft_count: int = 2
    seed: int = 0


class SearchEngine:
    def __init__(self, *, graph: SearchGraph, operators: list[Operator], policy: Policy,
                 evaluate: Evaluate, hooks: SearchHooks, budgets: Budgets, progress: Progress,
                 problem_path: str, problem_source: str, platform: str,
                 config: EngineConfig | None = None,
                 on_change: Callable[[], None] | None = None,
                 memory: Callable[[SearchGraph], str] | None = None,
                 meter: Any = None, fingerprint: dict[str, Any] | None = None,
                 facts: Callable[[], dict[str, Any]] | None = None):
        if not operators:
            raise ValueError("a search needs at least one operator")
        for op in operators:
            check_operator(op)
        self.graph, self.operators, self.policy = graph, operators, policy
        self.evaluate, self.hooks, self.budgets, self.progress = evaluate, hooks, budgets, progress
        self.problem_path, self.problem_source, self.platform = problem_path, problem_source, platform
        self.config = config or EngineConfig()
        self.on_change = on_change or (lambda: None)
        self.memory = memory
        self.meter = meter              # anything with .cost_usd and .tokens (LLM spending)
        self.fingerprint = fingerprint or {}
        self.facts = facts or dict
        # Randomness depends on the seed and on how far the search got, so a resumed run
        # continues with fresh (but reproducible) choices instead of replaying old ones.
        self.rng = random.Random(f"{self.config.seed}:{len(graph)}")
        self._turn = 0
        self._evals: dict[asyncio.Task, Node] = {}
        self._proposals: set[asyncio.Task] = set()
        self._root_done: set[str] = set()
        self._stalled = False  # the last proposal round found nothing new; wait for a result
        self._empty_rounds = 0
        self._asked = 0  # operator calls so far (a round that asked none is a wait, not a miss)
        self._repairing: set[int] = set()  # nodes a call in flight is repairing: asked once
        self._drafting = 0  # drafts from the reference asked for by calls in flight

    # ---- main loop ---------------------------------------------------------------------------
    async def run(self) -> str:
        started = time.monotonic()
        base_elapsed = self.progress.elapsed_s
        for node in self.graph.pending():
            self._launch(node)
        reason = None
        while True:
            interrupts.check()  # a SIGTERM whose KeyboardInterrupt a finalizer swallowed
            self.progress.in_flight = len(self._evals)
            self.progress.elapsed_s = base_elapsed + time.monotonic() - started
            if self.meter is not None:
                self.progress.cost, self.progress.tokens = self.meter.cost_usd, self.meter.tokens
            reason = should_stop(self.budgets, self.progress) or self.policy.should_stop(self.graph)
            if reason:
                break
            room = self.config.max_in_flight - len(self._evals) - len(self._proposals)
            if room > 0 and not self._stalled:
                task = asyncio.ensure_future(self._propose(room))
                self._proposals.add(task)
            waiting = set(self._evals) | self._proposals
            if not waiting:
                continue  # exhausted with nothing in flight: should_stop says so next turn
            timeout = None
            if self.budgets.max_time_s is not None:
                timeout = max(0.05, self.budgets.max_time_s - self.progress.elapsed_s)
            done, _ = await asyncio.wait(waiting, timeout=timeout,
                                         return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task in self._proposals:
                    self._proposals.discard(task)
                    try:
                        task.result()  # re-raise operator bugs instead of hiding them
                    except OperatorFailing as exc:
                        reason = f"{STOPPED_BY_FAILURES}: {exc}"
                        self.hooks.event("operator_failing", {"reason": str(exc)})
                else:
                    self._finish(task)
            if reason:
                break
        for task in self._proposals:
            task.cancel()
        if self._evals:  # let started measurements finish: they are paid for, and recorded
            await asyncio.wait(set(self._evals))
            for task in list(self._evals):
                self._finish(task)
        self.progress.in_flight = 0
        self.progress.elapsed_s = base_elapsed + time.monotonic() - started
        return reason or "stopped"

    # ---- proposals ---------------------------------------------------------------------------
    def _view(self, n: Node) -> ParentView:
        return ParentView(node_id=n.id, source=self.hooks.source(n.id), fitness=n.fitness,
                          stage=n.stage or "", reason=n.meta.get("reason", ""),
                          meta=dict(n.meta), result=_as_data(self.hooks.result(n.id)))

    def _context(self, parents: list[Node], want: int) -> ProposalContext:
        views = tuple(self._view(n) for n in parents)
        drafts = () if parents else tuple(
            self._view(n) for n in self.graph.evaluated()
            if n.parents == (ROOT,))[-MAX_EARLIER_DRAFTS:]
        return ProposalContext(
            problem_path=self.problem_path, problem_source=self.problem_source,
            platform=self.platform, parents=views,
            seen_hashes=frozenset(n.source_hash for n in self.graph),
            seen_meta=tuple(dict(n.meta) for n in self.graph.candidates()),
            rng_seed=self.rng.randrange(2**31), want=want,
            memory=self.memory(self.graph) if self.memory else "",
            fingerprint=dict(self.fingerprint), earlier_drafts=drafts, facts=self.facts(),
            report=self.hooks.event)

    def _next_operator(self) -> Operator:
        op = self.operators[self._turn % len(self.operators)]
        self._turn += 1
        return op

    async def _propose(self, want: int) -> None:
        asked = self._asked
        drafts = await self._draft_phase(want)
        if not drafts:
            drafts = await self._expand(want)
        added = 0
        for draft in drafts:
            if len(self._evals) >= self.config.max_in_flight or self._budget_left() <= 0:
                break
            h = source_hash(draft.source)
            if self.graph.by_hash(h) is not None:
                self.hooks.event("duplicate", {"operator": draft.operator, "source_hash": h})
                continue
            node = self.hooks.add_node(draft)
            self.graph.add(node)
            self._launch(node)
            added += 1
        if added:
            self._empty_rounds = 0
        elif self._asked == asked and (self._evals or len(self._proposals) > 1):
            self._stalled = True  # nothing to ask until a result or another proposal arrives
        else:
            # An exhaustible operator (tune) that found nothing new has nothing left until a
            # result arrives. A stochastic one (an LLM) may succeed on the next call, so it is
            # asked again, up to MAX_EMPTY_ROUNDS in a row (each call costs tokens).
            self._empty_rounds += 1
            retry = (any(not op.exhaustible for op in self.operators)
                     and self._empty_rounds < MAX_EMPTY_ROUNDS)
            if not retry:
                self._stalled = True
                self.progress.exhausted = not self._evals
            else:
                self._stalled = False
        self.on_change()

    async def _ask(self, op: Operator, ctx: ProposalContext) -> list[Draft]:
        self._asked += 1
        return await op.propose(ctx)

    async def _repair(self, op: Operator, node: Node) -> list[Draft]:
        """Ask `op` to fix a rejected node; no other call is sent to fix it meanwhile."""
        self._repairing.add(node.id)
        try:
            return self._fresh(await self._ask(op, self._context([node], 1)))
        finally:
            self._repairing.discard(node.id)

    def _fresh(self, drafts: list[Draft]) -> list[Draft]:
        return [d for d in drafts if self.graph.by_hash(source_hash(d.source)) is None]

    async def _draft_phase(self, want: int) -> list[Draft]:
        """Exhaustible operators (the synthesizer) draft all they have, once; stochastic ones
        (an LLM) follow the draft rule: draft, repair a failed draft, or stop drafting."""
        for op in self.operators:
            if not op.exhaustible or op.name in self._root_done:
                continue
            drafts = self._fresh(await self._ask(op, self._context([], want)))
            if drafts:
                return [Draft(d.source, d.parents or (ROOT,), d.operator, d.rationale, d.meta)
                        for d in drafts]
            self._root_done.add(op.name)
        drafters = [op for op in self.operators if not op.exhaustible]
        cap = draft_cap(self.config.draft_count, self.budgets.max_evals)
        step = next_step(self.graph, cap, want, can_repair=any(op.repairs for op in drafters),
                         busy=self._repairing, drafting=self._drafting)
        if not drafters or step is None:
            return []
        for op in drafters:
            if step.kind == "repair":
                if not op.repairs:
                    continue
                drafts = await self._repair(op, step.node)
            else:
                self._drafting += step.count
                try:
                    asked = self._fresh(await self._ask(op, self._context([], step.count)))
                finally:
                    self._drafting -= step.count
                drafts = [Draft(d.source, d.parents or (ROOT,), d.operator, d.rationale, d.meta)
                          for d in asked]
            if drafts:
                return drafts
        return []

    def _repair_target(self) -> Node | None:
        """Every other expansion, the newest rejected leaf (if an operator can repair it) that
        nothing later fixed: the reason it failed is the most useful thing to show a model that
        writes code."""
        if not any(op.repairs for op in self.operators):
            return None
        self._repair_turn = not getattr(self, "_repair_turn", False)
        if not self._repair_turn:
            return None
        leaves = [n for n in self.graph.evaluated() if repairable(self.graph, n)
                  and n.id not in self._repairing]
        return leaves[-1] if leaves else None

    async def _expand(self, want: int) -> list[Draft]:
        """Ask operators for children of the policy's choice; fall back to any accepted node."""
        broken = self._repair_target()
        if broken is not None:
            for op in self.operators:
                if op.repairs:
                    fresh = await self._repair(op, broken)
                    if fresh:
                        return fresh
        chosen = self.policy.select(self.graph, want, self.rng)
        fallback = [n.id for n in self.graph.ranked() if n.id not in chosen]
        for parents in ([chosen] if chosen else []) + [[p] for p in fallback]:
            nodes = [self.graph.get(p) for p in dict.fromkeys(parents)]
            for _ in range(len(self.operators)):
                op = self._next_operator()
                drafts = await self._ask(op, self._context(nodes, want))
                fresh = [d for d in drafts if self.graph.by_hash(source_hash(d.source)) is None]
                if len(fresh) < len(drafts):
                    self.hooks.event("duplicate", {"operator": op.name,
                                                   "count": len(drafts) - len(fresh)})
                if fresh:
                    return fresh
        return []

    def _budget_left(self) -> int:
        if self.budgets.max_evals is None:
            return 1 << 30
        return self.budgets.max_evals - self.progress.evals - len(self._evals)

    # ---- evaluations -------------------------------------------------------------------------
    def _launch(self, node: Node) -> None:
        source = self.hooks.source(node.id)
        task = asyncio.ensure_future(self._timed(node, source))
        self._evals[task] = node

    async def _timed(self, node: Node, source: str) -> tuple[EvalResult, float]:
        start = time.monotonic()
        result = await self.evaluate(node, source)
        return result, time.monotonic() - start

    def _finish(self, task: asyncio.Task) -> None:
        node = self._evals.pop(task)
        try:
            result, wall = task.result()
        except InfraError as exc:
            node.status = "infra_failed"
            self.hooks.infra_failure(node, str(exc))
            self._stalled = False
            self.on_change()
            return
        node.status, node.stage = "done", result.stage
        node.fitness, node.speedup = result.fitness, result.speedup
        node.sol_fraction = result.sol_fraction
        node.meta["reason"] = (result.reason or "")[:2000]
        node.meta["fitness_ci"] = fitness_interval(node, result)  # the displayed lower bound
        node.order = self.progress.evals
        self.hooks.record(node, result, wall)
        self.policy.update(self.graph, node)
        best = self.graph.best()
        self.progress.note_evaluation(best.fitness if best else None,
                                      best.sol_fraction if best else None)
        self._stalled = False  # a new result: operators may have more to offer
        self.progress.exhausted = False
        self.on_change()
