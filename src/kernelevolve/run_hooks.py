"""Adapters that persist a running search: engine events to the store, LLM spending."""
from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from kernelevolve.operators.base import Draft
from kernelevolve.search.graph import ROOT, Node
from kernelevolve.search.memory import history_table
from kernelevolve.store import Store
from kernelevolve.types import EvalResult

if TYPE_CHECKING:  # pragma: no cover - the run imports these hooks
    from kernelevolve.run import Run


class CostMeter:
    """LLM spending of a run (tokens always; dollars when the model's price is known).

    Every call is stored as an `llm_call` event (prompt, response, tokens, latency, cost; never
    the API key), and the totals are rebuilt from those events when a run resumes."""

    def __init__(self, store: Store, run_id: str):
        self.store, self.run_id = store, run_id
        self.cost_usd, self.tokens, self.unknown_cost_calls = 0.0, 0, 0
        for event in store.events(run_id, "llm_call"):
            self._add(event.data)

    def _add(self, data: dict[str, Any]) -> None:
        self.tokens += int(data.get("tokens_in") or 0) + int(data.get("tokens_out") or 0)
        if data.get("cost_usd") is None:
            self.unknown_cost_calls += 1
        else:
            self.cost_usd += float(data["cost_usd"])

    def record(self, call: Any) -> None:
        data = dataclasses.asdict(call) if dataclasses.is_dataclass(call) else dict(call)
        self._add(data)
        self.store.add_event(self.run_id, "llm_call", data)


class StoreHooks:
    """Persists what the engine does; every write is one transaction in the store."""

    LOUD = ("llm_error", "generation_failure")  # what the live view counts and shows

    def __init__(self, run: "Run"):
        self.run, self.store, self.run_id = run, run.store, run.id
        self._last_elapsed_save = time.monotonic()
        # Counted here, as they happen, for the live view (a resumed run starts from the store)
        run.live_events = {k: len(self.store.events(self.run_id, k)) for k in self.LOUD}
        errors = self.store.events(self.run_id, "llm_error")
        run.live_last_llm_error = first_line(errors[-1].data.get("error")) if errors else None
        self._results: dict[int, EvalResult] = {}  # finished results do not change

    def add_node(self, draft: Draft) -> Node:
        rec = self.store.add_node(self.run_id, parents=list(draft.parents), operator=draft.operator,
                                  rationale=draft.rationale, source=draft.source, meta=draft.meta)
        self.run._write_source(rec.id, draft.source)
        return node_from_record(rec)

    def record(self, node: Node, result: EvalResult, wall_s: float) -> None:
        self.store.record_evaluation(self.run_id, node.id, result, wall_s)
        self._artifacts(node.id, result)
        graph = getattr(self.run, "live_graph", None)
        if graph is not None:  # the search memory, kept with the run as evaluations land
            self.store.add_event(self.run_id, "memory", {"text": self.memory(graph)})
        now = time.monotonic()
        self.store.add_elapsed(self.run_id, now - self._last_elapsed_save)
        self._last_elapsed_save = now

    def _artifacts(self, node_id: int, result: EvalResult) -> None:
        """Compiled libraries (content-addressed, so shared ones are stored once) and logs."""
        from pathlib import Path

        for lib in result.libraries:
            path = Path(lib)
            if path.is_file():
                self.store.add_artifact(self.run_id, node_id, "library", path.name,
                                        path.read_bytes())
        for name, text in result.logs.items():
            self.store.add_artifact(self.run_id, node_id, "log", name, text)

    def infra_failure(self, node: Node, reason: str) -> None:
        self.store.mark_infra_failure(self.run_id, node.id, reason)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.add_event(self.run_id, kind, data)
        if kind in self.LOUD:
            self.run.live_events[kind] = self.run.live_events.get(kind, 0) + 1
        if kind == "llm_error":
            self.run.live_last_llm_error = first_line(data.get("error"))

    def source(self, node_id: int) -> str:
        return self.store.source(self.run_id, node_id)

    def result(self, node_id: int) -> EvalResult | None:
        if node_id not in self._results:
            found = self.store.evaluation(self.run_id, node_id)
            if found is None:
                return None
            self._results[node_id] = found
        return self._results[node_id]

    def memory(self, graph: Any) -> str:
        """The history table of the run so far (search/memory.py), as every prompt gets it."""
        return history_table(graph, self.result)

    def flush_elapsed(self) -> None:
        now = time.monotonic()
        self.store.add_elapsed(self.run_id, now - self._last_elapsed_save)
        self._last_elapsed_save = now


def first_line(text: Any, limit: int = 200) -> str:
    lines = str(text or "").strip().splitlines()
    return (lines[0] if lines else "")[:limit]


def node_from_record(node: Node) -> Node:
    """A stored node as the search sees it: the root is the reference, fitness 1.0 by
    definition (stores written before the root had its own status say otherwise)."""
    if node.id == ROOT:
        node.status, node.fitness = "root", 1.0
    return node


