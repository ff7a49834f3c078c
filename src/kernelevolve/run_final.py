"""The final re-measurement, told as it happens: which finalist, and about how long is left.

After "stopped", `optimize` re-measures its top finalists under the final timing policy, one
after the other. That took minutes with nothing on the screen. `remeasure` runs it and keeps a
`FinalProgress` on the run (`run.live_final`, read by report/live.py and report/lines.py like
`live_graph`), calling `notify` when a finalist starts or ends.

The estimate is what the run already knows, said as a range where the policy allows one:
- before any finalist ends, from each finalist's own search evaluation: its wall time less the
  time its timed cases took (loading, building, correctness), plus its timed cases at the final
  policy's per-case time. A case takes at least `min_time_s` (or the search's per-case time
  scaled by the final `min_reps`, when reps and not time bounded it), and with a `tight` policy
  as long as `max_time_s`: that is the range's high end;
- once a finalist has ended, from the measured wall times (the fastest and slowest so far, per
  finalist left): the same problem under the same policy costs about the same per finalist.
"""
from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from kernelevolve.errors import InfraError
from kernelevolve.harness.protocol.timing import TimingPolicy
from kernelevolve.types import EvalResult


@dataclass(frozen=True)
class Finalist:
    node_id: int
    operator: str
    fitness: float | None                        # its search-time figure
    estimate: tuple[float, float] | None = None  # seconds its re-measurement may take


def estimate(result: EvalResult | None, search: TimingPolicy,
             final: TimingPolicy) -> tuple[float, float] | None:
    """Seconds a re-measurement of this search evaluation may take under `final`: (low, high)."""
    if result is None or not result.wall_s:
        return None
    timed = sum(1 for c in result.cases if c.cand_ms is not None and not c.held_out)
    if not timed:
        return None
    per_case = result.measured_s / timed  # sample time, a little under the loop's wall time
    loop = min(max(per_case, search.min_time_s), search.max_time_s)
    overhead = max(0.0, result.wall_s - timed * loop)
    scaled = per_case * final.min_reps / max(1, search.min_reps)
    low = min(max(final.min_time_s, scaled), final.max_time_s)
    high = final.max_time_s if final.tight is not None else low
    return overhead + timed * low, overhead + timed * high


@dataclass
class FinalProgress:
    finalists: list[Finalist]
    k: int = 0                                 # 1-based finalist being measured; 0: none yet
    ended: int = 0                             # finalists measured or failed
    walls: list[float] = field(default_factory=list)  # seconds each measured finalist took
    started: float | None = None               # monotonic start of finalist k

    @property
    def current(self) -> Finalist | None:
        return self.finalists[self.k - 1] if 0 < self.k <= len(self.finalists) else None

    def left(self, now: float | None = None) -> tuple[float, float] | None:
        """Seconds left, finalist k's elapsed time deducted; None when nothing tells."""
        rest = self.finalists[self.ended:]  # the ones not ended, finalist k included
        if self.walls:  # measured: the fastest and the slowest finalist so far
            each = [(min(self.walls), max(self.walls))] * len(rest)
        else:
            known = [f.estimate for f in rest if f.estimate is not None]
            if rest and not known:
                return None
            mean = (sum(e[0] for e in known) / max(1, len(known)),
                    sum(e[1] for e in known) / max(1, len(known)))
            each = [f.estimate or mean for f in rest]
        if each and self.started is not None and self.ended < self.k:
            spent = (time.monotonic() if now is None else now) - self.started
            each[0] = (max(0.0, each[0][0] - spent), max(0.0, each[0][1] - spent))
        return sum(e[0] for e in each), sum(e[1] for e in each)

    def line(self, now: float | None = None) -> str:
        """`finalist 2/3: node 5 (tune, 1.456x search-time) · about 40-90 s left`"""
        f = self.current
        if f is None:
            return ""
        if self.ended >= len(self.finalists):  # the bar's last frame
            return (f"{len(self.finalists)} finalist(s) re-measured in "
                    f"{sum(self.walls):.0f} s")
        figure = f"{f.fitness:.3f}x search-time" if f.fitness is not None else "no figure"
        return (f"finalist {self.k}/{len(self.finalists)}: node {f.node_id} ({f.operator}, "
                f"{figure}) · {left_text(self.left(now))}")

    def event(self, now: float | None = None) -> dict[str, Any]:
        f, left = self.current, self.left(now)
        return {"event": "finalist", "k": self.k, "of": len(self.finalists),
                "node": f.node_id if f else None, "operator": f.operator if f else None,
                "search_fitness": f.fitness if f else None,
                "left_s": [round(left[0], 1), round(left[1], 1)] if left else None}


def left_text(left: tuple[float, float] | None) -> str:
    """`about 45 s left`, `about 40-90 s left`, `about 3-5 min left`; honest when unknown."""
    if left is None:
        return "time left unknown (no search timing to go by)"
    low, high = left
    if high <= 0:  # the elapsed time used it all up
        return "finishing (past the estimate)"
    if high < 1:   # a short estimate at its start (a quick policy, a warm pool)
        return "under a second left"
    if high >= 120:
        unit, low, high = "min", low / 60, high / 60
    else:
        unit = "s"
    lo_r, hi_r = max(1, round(low)), max(1, round(high))
    return f"about {hi_r} {unit} left" if hi_r - lo_r <= max(1, 0.15 * hi_r) \
        else f"about {lo_r}-{hi_r} {unit} left"


def finalists_of(run: Any, nodes: list[Any]) -> list[Finalist]:
    """The finalists with their estimates, from their stored search evaluations."""
    cfg = run.config
    return [Finalist(n.id, n.operator, n.fitness,
                     estimate(run.store.evaluation(run.id, n.id), cfg.search_timing,
                              cfg.final_timing)) for n in nodes]


def remeasure(run: Any, executor: Any, problem: Any, progress: FinalProgress, options: Any,
              candidate: Callable[[int], Any],
              notify: Callable[[], None]) -> list[tuple[int, EvalResult]]:
    """Re-measure each finalist in turn; a store event when each starts and ends."""
    remeasured = []
    run.live_final = progress
    for k, f in enumerate(progress.finalists, 1):
        progress.k, progress.started = k, time.monotonic()
        left = progress.left()
        run.store.add_event(run.id, "final_measurement_started", {
            "node_id": f.node_id, "k": k, "of": len(progress.finalists),
            "left_s": list(left) if left else None})
        notify()
        try:
            result = asyncio.run(executor.evaluate(problem, candidate(f.node_id), options))
        except InfraError as exc:  # nothing measured it: no verdict, not a rejection
            run.store.add_event(run.id, "final_measurement_failed",
                                {"node_id": f.node_id, "reason": str(exc)})
            result = None
        progress.ended = k
        if result is not None:
            progress.walls.append(time.monotonic() - progress.started)
            run.store.add_event(run.id, "final_measurement", {"node_id": f.node_id,
                                                              "result": result.to_dict()})
            remeasured.append((f.node_id, result))
        notify()
    return remeasured
