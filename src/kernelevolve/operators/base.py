"""The operator protocol: `propose(context) -> drafts`, async.

An operator never evaluates anything. It reads the search state it is given (the parent nodes
with their sources and results, the problem, what was already tried) and returns drafts; the
engine deduplicates, stores and evaluates them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable


@dataclass(frozen=True)
class ParentView:
    """What an operator may know about one parent node."""

    node_id: int
    source: str
    fitness: float | None          # None: not measured (or not accepted yet)
    stage: str                      # gate stage reached ("accepted" when it passed)
    reason: str
    meta: dict[str, Any] = field(default_factory=dict)  # operator-owned data, e.g. tune config
    result: dict[str, Any] = field(default_factory=dict)  # full EvalResult dict, when evaluated


@dataclass(frozen=True)
class ProposalContext:
    problem_path: str
    problem_source: str
    platform: str
    parents: tuple[ParentView, ...]      # empty in the draft phase (proposals from the root)
    seen_hashes: frozenset[str]          # sha256 of every source already in the graph
    seen_meta: tuple[dict[str, Any], ...]  # meta of every node (e.g. tune configs already tried)
    rng_seed: int                        # operators draw randomness from this, for replay
    want: int = 1                        # how many drafts the engine would like
    memory: str = ""                     # compact summary of what the run has tried so far
    fingerprint: dict[str, Any] = field(default_factory=dict)  # the measuring machine
    # In the draft phase: the evaluated children of the root so far (drafts and seeds), so a
    # new draft learns from them (another strategy only after correct but slower ones); empty
    # when expanding a parent.
    earlier_drafts: tuple[ParentView, ...] = ()
    # What the run knows beyond the graph: e.g. "baselines" (eager and torch.compile ms per
    # case), "baseline" (what fitness is relative to).
    facts: dict[str, Any] = field(default_factory=dict)
    # Operators report what is not a draft (e.g. an LLM reply with no usable code) here;
    # the engine stores it as an event, and the funnel counts `generation_failure` events.
    report: Callable[[str, dict[str, Any]], None] = field(default=lambda kind, data: None,
                                                           compare=False, repr=False)


@dataclass(frozen=True)
class Draft:
    source: str
    parents: tuple[int, ...]
    operator: str
    rationale: str
    meta: dict[str, Any] = field(default_factory=dict)


class OperatorFailing(Exception):
    """An operator that cannot work any more (its service failed call after call): the engine
    stops the search with this message as the reason, instead of asking it again forever."""


@runtime_checkable
class Operator(Protocol):
    """What the engine asks of an operator. Its capabilities are declared as class attributes
    (the engine reads them, never guesses them):

    - `repairs`: it can read a rejected candidate's reason and propose a fix (the engine gives
      it repair turns on rejected nodes);
    - `exhaustible`: an empty answer means it has nothing left to try from that parent (the
      engine stops asking it there); False for operators whose next call may differ (an LLM).
    """
    name: str
    repairs: bool
    exhaustible: bool

    async def propose(self, context: ProposalContext) -> list[Draft]:
        """Return zero or more drafts; zero means this operator has nothing left to try here."""
        ...


CAPABILITIES = ("repairs", "exhaustible")


def check_operator(op: Any) -> None:
    """An operator must declare every capability (a bool) and `propose`."""
    missing = [c for c in CAPABILITIES if not isinstance(getattr(op, c, None), bool)]
    if not callable(getattr(op, "propose", None)) or not getattr(op, "name", ""):
        missing.insert(0, "name and propose")
    if missing:
        raise TypeError(f"operator {getattr(op, 'name', type(op).__name__)!r} does not declare "
                        f"{', '.join(missing)} (see kernelevolve.operators.base.Operator)")
