"""Selection policies: which nodes to expand next. Each is a few dozen lines behind one protocol.

`select(graph, k, rng)` returns up to k parent ids (repeats allowed); `update(graph, node)` is
told every result; `should_stop(graph)` may end the search with a reason (None: carry on).
"""
from __future__ import annotations

import math
import random
from typing import Protocol

from kernelevolve.errors import UsageError
from kernelevolve.search.graph import Node, SearchGraph


class Policy(Protocol):
    name: str

    def select(self, graph: SearchGraph, k: int, rng: random.Random) -> list[int]: ...

    def update(self, graph: SearchGraph, node: Node) -> None: ...

    def should_stop(self, graph: SearchGraph) -> str | None: ...


class _Base:
    name = ""

    def update(self, graph: SearchGraph, node: Node) -> None:
        return None

    def should_stop(self, graph: SearchGraph) -> str | None:
        return None


class BestFirstUCB(_Base):
    """Best fitness plus an exploration bonus that shrinks as a node is expanded (UCB1)."""

    name = "ucb"

    def __init__(self, exploration: float = 0.5):
        self.c = exploration

    def select(self, graph: SearchGraph, k: int, rng: random.Random) -> list[int]:
        ranked = graph.ranked()
        if not ranked:
            return []
        top = ranked[0].fitness or 1.0
        total = sum(graph.visits(n.id) for n in ranked) + 1
        chosen: list[int] = []
        virtual: dict[int, int] = {}  # visits we are about to add in this call
        for _ in range(k):
            def score(n: Node) -> float:
                v = graph.visits(n.id) + virtual.get(n.id, 0)
                bonus = self.c * math.sqrt(math.log(total + len(chosen)) / (v + 1))
                return (n.fitness or 0.0) / top + bonus
            best = max(ranked, key=lambda n: (score(n), -n.id))
            chosen.append(best.id)
            virtual[best.id] = virtual.get(best.id, 0) + 1
        return chosen


class DiverseBeam(_Base):
    """Expand the best `width` nodes, at most `per_branch` from any one branch of the tree."""

    name = "beam"

    def __init__(self, width: int = 4, per_branch: int = 2):
        self.width, self.per_branch = width, per_branch

    def beam(self, graph: SearchGraph) -> list[Node]:
        beam: list[Node] = []
        per: dict[int, int] = {}
        for node in graph.ranked():
            branch = graph.lineage(node.id)
            if per.get(branch, 0) < self.per_branch:
                beam.append(node)
                per[branch] = per.get(branch, 0) + 1
            if len(beam) == self.width:
                break
        return beam

    def select(self, graph: SearchGraph, k: int, rng: random.Random) -> list[int]:
        beam = self.beam(graph)
        if not beam:
            return []
        # least-expanded members of the beam first, so every member gets its turn
        order = sorted(beam, key=lambda n: (graph.visits(n.id), -(n.fitness or 0), n.id))
        return [order[i % len(order)].id for i in range(k)]


class Greedy(_Base):
    """Always expand the best node (a baseline for the benchmark)."""

    name = "greedy"

    def select(self, graph: SearchGraph, k: int, rng: random.Random) -> list[int]:
        best = graph.best()
        return [best.id] * k if best else []


class RandomPolicy(_Base):
    """Expand a uniformly random accepted node (a baseline for the benchmark)."""

    name = "random"

    def select(self, graph: SearchGraph, k: int, rng: random.Random) -> list[int]:
        ranked = graph.ranked()
        return [rng.choice(ranked).id for _ in range(k)] if ranked else []


POLICIES = {cls.name: cls for cls in (BestFirstUCB, DiverseBeam, Greedy, RandomPolicy)}


def make_policy(name: str) -> Policy:
    try:
        return POLICIES[name]()
    except KeyError:
        raise UsageError(f"unknown policy {name!r}; choose one of: {', '.join(POLICIES)}") from None
