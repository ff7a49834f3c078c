"""The search graph. A node is a candidate and its measured state; edges are transformations.

Derived state (depth, buggy, stage reached, visits) is computed from links and results, never
kept in flags that must be synchronised by hand. `Node` is the store's node type
(store/records.py): the graph holds what the store hands back, not a parallel copy. Node 0 is
the root: the PyTorch reference itself (fitness 1.0 by definition: the baseline every speedup
is relative to).
"""
from __future__ import annotations

from typing import Iterator

from kernelevolve.store.records import Node

__all__ = ["ROOT", "Node", "SearchGraph"]

ROOT = 0


class SearchGraph:
    def __init__(self) -> None:
        self.nodes: dict[int, Node] = {}
        self._children: dict[int, list[int]] = {}
        self._by_hash: dict[str, int] = {}

    def add(self, node: Node) -> Node:
        if node.id in self.nodes:
            raise ValueError(f"node {node.id} already in the graph")
        for p in node.parents:
            if p not in self.nodes:
                raise ValueError(f"node {node.id} names unknown parent {p}")
        self.nodes[node.id] = node
        self._children.setdefault(node.id, [])
        for p in node.parents:
            self._children[p].append(node.id)
        self._by_hash.setdefault(node.source_hash, node.id)
        return node

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    def __len__(self) -> int:
        return len(self.nodes)

    def get(self, node_id: int) -> Node:
        return self.nodes[node_id]

    def by_hash(self, source_hash: str) -> Node | None:
        node_id = self._by_hash.get(source_hash)
        return None if node_id is None else self.nodes[node_id]

    def children(self, node_id: int) -> list[int]:
        return list(self._children.get(node_id, ()))

    def visits(self, node_id: int) -> int:
        return len(self._children.get(node_id, ()))

    def depth(self, node_id: int) -> int:
        node = self.nodes[node_id]
        return 0 if not node.parents else 1 + max(self.depth(p) for p in node.parents)

    def lineage(self, node_id: int) -> int:
        """The root child this node descends from (its branch), for diversity."""
        node = self.nodes[node_id]
        while node.parents and node.parents[0] != ROOT:
            node = self.nodes[node.parents[0]]
        return node.id

    def candidates(self) -> list[Node]:
        return [n for n in self if n.id != ROOT]

    def evaluated(self) -> list[Node]:
        return sorted((n for n in self if n.evaluated), key=lambda n: n.order or 0)

    def accepted(self) -> list[Node]:
        return [n for n in self if n.accepted]

    def ranked(self) -> list[Node]:
        """Accepted, measured nodes, best fitness first (ties: earlier node first)."""
        measured = [n for n in self.accepted() if n.fitness is not None]
        return sorted(measured, key=lambda n: (-n.fitness, n.id))

    def best(self) -> Node | None:
        ranked = self.ranked()
        return ranked[0] if ranked else None

    def pending(self) -> list[Node]:
        return [n for n in self if n.status == "pending"]
