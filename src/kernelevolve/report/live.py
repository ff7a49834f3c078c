"""The live display of a running search: best so far, evaluations, rate, funnel."""
from __future__ import annotations

import time
from typing import Any

from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kernelevolve.harness.protocol.stages import VERDICT_STAGES as _FUNNEL


class LiveView:
    def __init__(self, run: Any, console):
        self.run, self.console = run, console
        self.status = "starting"
        self.started = time.monotonic()
        self._session_base: int | None = None  # evaluations done before this session (resume)
        self._live = Live(self.render(), console=console, refresh_per_second=4, transient=False)

    def __enter__(self) -> "LiveView":
        self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._live.update(self.render())
        self._live.__exit__(*exc)

    def set_status(self, status: str) -> None:
        self.status = status
        self.refresh()

    def refresh(self) -> None:
        self._live.update(self.render())

    def render(self) -> Group:
        graph = getattr(self.run, "live_graph", None)
        progress = getattr(self.run, "live_progress", None)
        budgets = self.run.config.budgets
        head = Text(f"run {self.run.id} · {self.status}", style="bold")
        table = Table.grid(padding=(0, 2))
        table.add_column(style="dim")
        table.add_column()
        if graph is not None and progress is not None:
            best = graph.best()
            elapsed = max(time.monotonic() - self.started, 1e-6)
            budget = f" / {budgets.max_evals}" if budgets.max_evals else ""
            table.add_row("best so far", self._best_text(best))
            table.add_row("evaluations", f"{progress.evals}{budget} done, "
                                         f"{progress.in_flight} in flight")
            if self._session_base is None:
                self._session_base = progress.evals
            table.add_row("rate", f"{60 * (progress.evals - self._session_base) / elapsed:.1f} "
                                  "per minute (this session)")
            counts = {k: 0 for k in _FUNNEL}
            for node in graph.candidates():
                if node.status == "done" and node.stage in counts:
                    counts[node.stage] += 1
            funnel = "  ".join(f"{k} {counts[k]}" for k in _FUNNEL if counts[k] or k == "accepted")
            table.add_row("rejected at / accepted", funnel)
        loud = getattr(self.run, "live_events", None) or {}
        if loud.get("llm_error") or loud.get("generation_failure"):
            parts = []
            if loud.get("llm_error"):
                last = getattr(self.run, "live_last_llm_error", None)
                parts.append(f"{loud['llm_error']} calls failed" + (f" (last: {last})" if last
                                                                   else ""))
            if loud.get("generation_failure"):
                parts.append(f"{loud['generation_failure']} replies without usable code")
            table.add_row(Text("LLM", style="bold red"), Text("; ".join(parts), style="red"))
        final = getattr(self.run, "live_final", None)
        return Group(head, table, FinalBar(final)) if final is not None else Group(head, table)

    def _best_text(self, best: Any) -> str:
        """The lower bound during the search, the re-measured figure once finished
        (report/best_figure.py)."""
        from kernelevolve.report.best_figure import run_best_text

        if best is None:
            return "-"
        text = run_best_text(self.run, best, self.status, f", {best.operator}")
        return text if self.status == "finished" else text + "; finalists re-measured at the end"


class FinalBar:
    """The final re-measurement under the panel: a bar over the estimated time, which finalist
    (node, operator, search-time figure, k of K) and about how long is left (run_final.py).
    Rendered afresh at each of the panel's refreshes, so the time left counts down."""

    def __init__(self, final: Any):
        self.final = final

    def __rich__(self) -> Table:
        from rich.progress_bar import ProgressBar

        now = time.monotonic()
        final = self.final
        left = final.left(now)
        done = sum(final.walls)
        spent = now - final.started if final.started is not None and final.ended < final.k \
            else 0.0
        if left is None:  # no estimate: the share of finalists ended
            total, completed = float(len(final.finalists)), float(final.ended)
        else:
            total = done + spent + (left[0] + left[1]) / 2
            completed = done + spent
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="dim")
        grid.add_column(width=30)
        grid.add_column()
        grid.add_row("re-measuring", ProgressBar(total=max(total, 1e-6), completed=completed),
                     final.line(now) or "starting")
        return grid
