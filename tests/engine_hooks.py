"""An in-memory stand-in for the run's store hooks, for tests that drive the real SearchEngine
without a store: nodes get ids in order, results are kept by node id, infra failures fail."""
from __future__ import annotations

from kernelevolve.search.engine import source_hash
from kernelevolve.search.graph import ROOT, Node


class MemoryHooks:
    def __init__(self, graph):
        self.graph, self.sources, self.results = graph, {ROOT: "reference"}, {}

    def add_node(self, draft):
        node_id = max(self.graph.nodes) + 1
        self.sources[node_id] = draft.source
        return Node(node_id, draft.parents, draft.operator, draft.rationale,
                    source_hash(draft.source), meta=dict(draft.meta))

    def record(self, node, result, wall_s):
        self.results[node.id] = result

    def infra_failure(self, node, reason):
        raise AssertionError(reason)

    def event(self, kind, data):
        pass

    def source(self, node_id):
        return self.sources[node_id]

    def result(self, node_id):
        return self.results.get(node_id)
