"""Run a bench campaign: each problem's search in turn, recorded as it goes.

Per problem: skipped when the meta-device estimate says it will not fit in memory; otherwise
a `Run` is created with the bench's settings (its id written to the campaign before the search
starts), executed, and its outcome turned into a row (metrics.py). A problem that cannot be
loaded is a failed row with the one-line reason; an interrupt (Ctrl-C, SIGTERM) leaves the
current row running with its run interrupted, and running the bench again resumes that run.
A total time budget stops starting new problems once spent; they stay pending.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from kernelevolve import interrupts
from kernelevolve.bench.campaign import Campaign
from kernelevolve.memory_estimate import too_big
from kernelevolve.bench.metrics import compile_factor
from kernelevolve.errors import ExecutorError, KernelevolveError, ProblemError


def run_campaign(camp: Campaign, workspace: Path, flags: dict[str, Any], *,
                 total_time: float | None = None,
                 say: Callable[[str, dict[str, Any]], None] | None = None) -> Campaign:
    from kernelevolve.config import build_config
    from kernelevolve.run import Run

    note = say or (lambda _m, _r: None)
    started = time.monotonic()
    camp.data["stopped"] = None
    for row in camp.rows:
        interrupts.check()  # between problems: a swallowed SIGTERM stops here
        if row["status"] in ("done", "skipped", "failed"):
            continue
        if total_time is not None and time.monotonic() - started >= total_time:
            camp.data["stopped"] = f"total time budget reached ({total_time:g} s)"
            break
        if row["status"] == "pending":
            reason = too_big(row["path"])
            if reason is not None:
                row.update(status="skipped", reason=reason)
                camp.save()
                note("skipped", row)
                continue
            try:
                # a row may carry its own budget (tune-model spreads one by Amdahl weight)
                row_flags = {**flags, **{k: row[k] for k in ("max_evals",) if row.get(k)}}
                run = Run.create(row["path"], build_config(None, row_flags), workspace=workspace)
            except ProblemError as exc:
                row.update(status="failed", reason=str(exc))
                camp.save()
                note("failed", row)
                continue
            row.update(status="running", run_id=run.id)
            camp.save()
        else:
            run = Run.load(row["run_id"], workspace)
        note("start", row)
        if run.status != "completed":
            try:
                run.execute(on_status=lambda phase, r=row: note(f"phase {phase}", r),
                            on_change=RowProgress(run, row, note))
            except ExecutorError:
                raise  # the evaluation backend gave out: stop; the row resumes next time
            except KernelevolveError as exc:
                row.update(status="failed", reason=(str(exc).splitlines() or [""])[0])
                camp.save()
                note("failed", row)
                continue
        row.update(_row(run))
        camp.save()
        note("done", row)
    camp.save()
    return camp


def _row(run: Any) -> dict[str, Any]:
    rec = run.record
    outcome = rec.outcome or {}
    store = run.store
    correct = any(n.accepted for n in store.nodes(run.id))
    speedup = outcome.get("speedup")
    if speedup is None:
        measured = [f["speedup"] for f in outcome.get("finalists", [])
                    if f.get("speedup") is not None and f.get("stage") == "accepted"]
        speedup = max(measured) if measured else None
    factor = compile_factor(r.to_dict() for _, r in store.evaluations(run.id))
    safe = bool(outcome.get("safe"))
    # What the user gets: the kernel's speedup when it is a safe win, else eager (none here)
    delivered = speedup if safe else None
    return {"status": "done", "verdict": outcome.get("kind"), "safe": safe,
            "message": outcome.get("message"), "correct": correct,
            "measured_speedup": speedup if correct else None, "speedup": delivered,
            "interval": outcome.get("interval"), "compile_factor": factor,
            "speedup_compile": delivered / factor if delivered and factor else None,
            "evals": store.eval_count(run.id), "funnel": store.funnel(run.id),
            "wall_s": rec.elapsed_s, "reason": None if correct else outcome.get("message")}


class RowProgress:
    """A search's progress as row notes, "progress TEXT": each evaluation's count and each
    finalist of the final re-measurement (run_final.py), so a bench or tune-model log is not
    silent for the minutes one problem takes."""

    def __init__(self, run: Any, row: dict[str, Any], note: Callable[[str, dict[str, Any]], None]):
        self.run, self.row, self.note = run, row, note
        self._evals: int | None = None  # what a resumed run had evaluated is not news
        self._finalist = 0

    def __call__(self) -> None:
        graph = getattr(self.run, "live_graph", None)
        if graph is not None:
            done = len(graph.evaluated())
            if self._evals is not None and done > self._evals:
                budget = self.run.config.budgets.max_evals
                self.note(f"progress {done}{f'/{budget}' if budget else ''} evaluations done",
                          self.row)
            self._evals = done
        final = getattr(self.run, "live_final", None)
        if final is not None and final.k > self._finalist and final.current is not None:
            self._finalist = final.k
            self.note(f"progress {final.line()}", self.row)
