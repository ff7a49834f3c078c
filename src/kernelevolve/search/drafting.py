"""The draft phase: how many candidates are written from the reference, and when to stop.

A draft is a root child written by an operator (a seed given by the user is not one). The rule,
asked before every proposal round:

1. Stop drafting as soon as a draft (or a repair of one) is accepted at a fitness of at least 1
   (it beats the baseline): the search expands it from then on. A seed the user gave does not
   stop drafting.
2. Repair before drafting again: a draft (or a repair of one) rejected for an error - build,
   load, run, correctness, integrity, timing - failed for a reason its approach does not answer
   for, so the next call fixes that node, with its error in the prompt, instead of asking for a
   different strategy. A node already fixed is never sent (see `superseded`).
3. Draft again only when every draft lineage ended for a strategy reason (accepted, correct,
   but slower than the baseline) and fewer than `cap` drafts exist. The cap is
   `EngineConfig.draft_count` (default 2), and at most a third of --max-evals.
4. Past the cap, draft only when there is nothing else to work on (nothing accepted, nothing
   to repair, nothing being evaluated), so a run whose drafts all failed is not stuck.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernelevolve.search.graph import ROOT, Node, SearchGraph

MAX_REPAIR_DEPTH = 4  # repairs of repairs of ... stop here; the policy explores elsewhere


@dataclass(frozen=True)
class DraftStep:
    kind: str               # "draft" (from the reference) or "repair" (fix `node`)
    count: int = 1          # drafts to ask for
    node: Node | None = None


def draft_cap(draft_count: int, max_evals: int | None) -> int:
    """At most `draft_count` drafts, and at most a third of the evaluation budget (at least 1)."""
    if max_evals is None:
        return max(1, draft_count)
    return max(1, min(draft_count, max_evals // 3))


def drafts(graph: SearchGraph) -> list[Node]:
    """The root children an operator wrote (seeds excluded)."""
    return [n for n in graph.candidates() if n.parents == (ROOT,) and n.operator != "seed"]


def descendants(graph: SearchGraph, node_id: int) -> list[Node]:
    out, todo, seen = [], list(graph.children(node_id)), set()
    while todo:
        nid = todo.pop()
        if nid in seen:
            continue
        seen.add(nid)
        out.append(graph.get(nid))
        todo.extend(graph.children(nid))
    return out


def superseded(graph: SearchGraph, node: Node) -> bool:
    """A rejected node that needs no fix: a descendant of it is accepted, or a later node with
    the same source is."""
    if any(d.accepted for d in descendants(graph, node.id)):
        return True
    return any(n.accepted and n.id > node.id and n.source_hash == node.source_hash
               for n in graph.candidates())


def repairable(graph: SearchGraph, node: Node) -> bool:
    """A rejected leaf, not too deep, that nothing later has fixed."""
    return (node.buggy and graph.visits(node.id) == 0
            and graph.depth(node.id) <= MAX_REPAIR_DEPTH and not superseded(graph, node))


def _lineage_nodes(graph: SearchGraph, roots: list[Node]) -> list[Node]:
    return [m for r in roots for m in (r, *descendants(graph, r.id))]


def next_step(graph: SearchGraph, cap: int, want: int, *, can_repair: bool,
              busy: set[int] = frozenset(), drafting: int = 0) -> DraftStep | None:
    """What the draft phase does now (None: drafting is over, or wait and expand). `busy`: nodes
    a call in flight is already repairing; `drafting`: drafts asked for by calls in flight."""
    mine = drafts(graph)
    lineage = _lineage_nodes(graph, mine)
    if any(n.accepted and (n.fitness or 0.0) >= 1.0 for n in lineage):
        return None
    if can_repair:
        broken = [n for n in lineage if repairable(graph, n) and n.id not in busy]
        if broken:
            newest = max(broken, key=lambda n: (n.order if n.order is not None else -1, n.id))
            return DraftStep("repair", node=newest)
    waiting = busy or drafting or any(n.status == "pending" for n in graph.candidates())
    nothing_else = not waiting and not any(n.accepted for n in graph.candidates())
    have = len(mine) + drafting
    if have < cap:
        if have == 0 or nothing_else or (
                not waiting and all(_strategy_failure(graph, d) for d in mine)):
            return DraftStep("draft", count=max(1, min(want, cap - have)))
        return None  # wait for, or build on, what the drafts found
    return DraftStep("draft", count=1) if nothing_else else None


def _strategy_failure(graph: SearchGraph, draft: Node) -> bool:
    """The draft's lineage ended correct but slower than the baseline (no error left to fix)."""
    nodes = [draft, *descendants(graph, draft.id)]
    slow = any(n.accepted and (n.fitness or 0.0) < 1.0 for n in nodes)
    return slow and not any(repairable(graph, n) for n in nodes)
