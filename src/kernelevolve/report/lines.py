"""Progress where there is no terminal: one plain line per evaluation and per phase.

The live panel (report/live.py) redraws itself, which a log file, a pipe or CI cannot show: it
printed nothing for minutes, then one frame. `LineProgress` has the live view's interface
(`refresh`, `set_status`, a context manager) and prints instead, unwrapped, as things happen:

    [  3/30] node 5 tune (from 2): accepted 1.234x · best so far >= 1.31x (node 4, 95% lower bound; measured 1.46x)
    [  4/30] node 6 llm (from 4): rejected at correctness: case 'small': max abs error 3.1e-02
    llm: call failed (2 in a row): HTTP 401: invalid api key
    phase: re-measuring the finalists
    finalist 1/3: node 5 (tune, 1.456x search-time) · about 40-90 s left

`json_lines=True` writes the same events as one JSON object per line, for machines; `quiet`
prints nothing (the caller still prints the outcome).
"""
from __future__ import annotations

import json
import sys
from typing import Any, TextIO


class LineProgress:
    def __init__(self, run: Any, *, json_lines: bool = False, quiet: bool = False,
                 stream: TextIO | None = None):
        self.run, self.json_lines, self.quiet = run, json_lines, quiet
        self.stream = stream or sys.stdout
        self._seen: set[int] = set()
        self._llm_errors: int | None = None
        self._finalist = 0  # the last finalist whose start was told

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.refresh()

    def set_status(self, status: str) -> None:
        self.refresh()  # what happened before the phase changed comes first
        self.emit({"event": "phase", "status": status}, f"phase: {status}")

    def _baseline(self) -> Any:
        """The graph, once the search has one; what was evaluated before this session (a
        resumed run) and the LLM errors counted so far are not news."""
        graph = getattr(self.run, "live_graph", None)
        if graph is not None and self._llm_errors is None:
            self._seen = {n.id for n in graph.evaluated()}
            self._llm_errors = (getattr(self.run, "live_events", None) or {}).get("llm_error", 0)
        return graph

    def refresh(self) -> None:
        graph = self._baseline()
        if graph is None:
            return
        self._llm_lines()
        budget = self.run.config.budgets.max_evals
        for node in graph.evaluated():
            if node.id not in self._seen:
                self._seen.add(node.id)
                self._evaluation(node, graph, budget)
        self._final_lines()

    def _evaluation(self, node: Any, graph: Any, budget: int | None) -> None:
        from kernelevolve.run_hooks import first_line

        done = len(graph.evaluated())
        best = graph.best()
        reason = first_line(node.meta.get("reason"), 160)
        data = {"event": "evaluation", "node": node.id, "operator": node.operator,
                "parents": list(node.parents), "stage": node.stage, "speedup": node.speedup,
                "fitness": node.fitness, "evaluations": done, "budget": budget,
                "best": best.fitness if best else None, "best_node": best.id if best else None}
        if node.stage != "accepted" and reason:
            data["reason"] = reason
        count = f"[{done:>3}/{budget}]" if budget else f"[{done:>3}]"
        parents = ",".join(str(p) for p in node.parents)
        verdict = (f"accepted {node.speedup:.3f}x" if node.stage == "accepted" and node.speedup
                   else f"rejected at {node.stage}" + (f": {reason}" if reason else ""))
        best_text = _best_text(best)
        self.emit(data, f"{count} node {node.id} {node.operator} (from {parents}): {verdict} · "
                        f"{best_text}")

    def _final_lines(self) -> None:
        """One line per finalist as its re-measurement starts: what, and about how long is left
        (run_final.py)."""
        final = getattr(self.run, "live_final", None)
        if final is not None and final.k > self._finalist and final.current is not None:
            self._finalist = final.k  # as of its start: a refresh may come a little later
            self.emit(final.event(final.started), final.line(final.started))

    def _llm_lines(self) -> None:
        now = (getattr(self.run, "live_events", None) or {}).get("llm_error", 0)
        if now > self._llm_errors:
            last = getattr(self.run, "live_last_llm_error", None) or "?"
            self.emit({"event": "llm_error", "failed_calls": now, "last_error": last},
                      f"llm: {now - self._llm_errors} more call(s) failed ({now} in all): {last}")
            self._llm_errors = now

    def emit(self, data: dict[str, Any], text: str) -> None:
        if self.quiet:
            return
        line = json.dumps(data, default=str) if self.json_lines else text
        self.stream.write(line + "\n")
        self.stream.flush()


def _best_text(best: Any) -> str:
    """The best node's 95% lower bound, labelled (report/best_figure.py)."""
    from kernelevolve.report.best_figure import node_best_text

    return "best so far " + node_best_text(best) if best else "no accepted candidate yet"
