"""Draft mode of a bench (`--draft`, the default of `--suite`): per problem, the built-in
synthesizer's draft evaluated once by the real harness, with no search.

The cheapest honest answer to "does the synthesizer cover this op, and is its kernel right":
no tuning, no re-measurement of finalists (a search's `optimize` costs ~15 s more per problem
on this kind of machine, mostly a new worker pool and the final timing). Per row:

- not covered: synthesize() raised NotCovered; the row keeps the synthesizer's reason;
- otherwise the candidate is written to WORKSPACE/benches/NAME/ and evaluated once through
  every gate on the problem's cases with the search's timing policy: correct (the measured
  speedup over eager with its 95% interval, or none where the platform cannot time the
  language: Triton under the CPU interpreter) or rejected (the stage and the reason);
- synth_error: the synthesizer itself raised (a bug there; the first line is kept).

One evaluator (one sandboxed worker pool) serves the whole campaign. A row is saved when it
finishes; a killed bench redoes only the row it was in (`running` rows start over).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from kernelevolve.bench.campaign import Campaign
from kernelevolve.memory_estimate import too_big
from kernelevolve.errors import ProblemError, UsageError

FINISHED = ("done", "skipped", "failed")


def _first(text: str, limit: int = 300) -> str:
    """A reason's first line; when it only announces what follows ("importing the candidate
    failed:"), with the line that says what failed (the compiler's error, the exception)."""
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    if not lines:
        return ""
    head = lines[0]
    if head.endswith(":") and len(lines) > 1:
        said = [line for line in lines[1:] if "error" in line.lower()] or lines[-1:]
        head = f"{head} {said[-1]}"
    return head[:limit]


def _evaluator(flags: dict[str, Any]):
    from kernelevolve.config import build_config
    from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator
    from kernelevolve.harness.gates.integrity import IntegrityPolicy
    from kernelevolve.harness.driver.pool import Limits

    cfg = build_config(None, flags)
    if cfg.executor != "local":
        raise UsageError("--draft evaluates on this machine: drop --executor ray, or pass "
                         "--search to optimize each problem on the cluster")
    options = EvalOptions(timing=cfg.search_timing, baseline=cfg.baseline,
                          time_compile=bool(flags.get("time_compile")),
                          integrity=IntegrityPolicy(allow_no_kernel=cfg.allow_no_kernel,
                                                    strict=cfg.strict))
    limits = Limits(stage_timeout_s=cfg.stage_timeout) if cfg.stage_timeout else None
    return Evaluator(cfg.platform, workers=1, options=options, sandbox_mode=cfg.sandbox,
                     limits=limits)


def draft_row(evaluate: Callable[[str, Path], Any], path: str, language: str,
              folder: Path) -> dict[str, Any]:
    """One problem's row: synthesize, then (when covered) one evaluation."""
    from kernelevolve.store.funnel import funnel_counts
    from kernelevolve.synth import synthesize
    from kernelevolve.synth.capture import NotCovered

    from kernelevolve.problem import load_problem

    started = time.monotonic()
    load_problem(path)  # a problem that cannot be loaded is a failed row (ProblemError)
    base = {"status": "done", "language": language, "correct": False, "safe": False,
            "speedup": None, "measured_speedup": None, "speedup_compile": None, "evals": 0}
    try:
        source, plan = synthesize(path, language)
    except NotCovered as exc:
        return {**base, "verdict": "not_covered", "reason": _first(exc),
                "wall_s": time.monotonic() - started}
    except Exception as exc:  # noqa: BLE001 - a synthesizer crash is a finding, not a stop
        return {**base, "verdict": "synth_error", "reason": f"{type(exc).__name__}: "
                f"{_first(exc)}", "wall_s": time.monotonic() - started}
    folder.mkdir(parents=True, exist_ok=True)
    candidate = folder / f"{Path(path).stem}.{language}.py"
    candidate.write_text(source)
    result = evaluate(path, candidate)
    row = {**base, "plan": plan.summary(), "candidate": str(candidate), "evals": 1,
           "stage": result.stage, "funnel": funnel_counts([("done", result.stage, 1)]),
           "wall_s": time.monotonic() - started}
    if not result.accepted:
        return {**row, "verdict": "rejected", "reason": f"{result.stage}: "
                f"{_first(result.reason)}", "detail": str(result.reason)[:2000]}
    ci = result.speedup_ci
    safe = bool(result.measured and ci and ci[0] > 1.0)
    cci = result.compile_speedup_ci
    return {**row, "verdict": "correct", "correct": True, "reason": _first(result.reason),
            "measured": result.measured, "measured_speedup": result.speedup,
            "interval": list(ci) if ci else None, "safe": safe,
            "speedup": result.speedup if safe else None,
            "measured_speedup_compile": result.compile_speedup,
            "speedup_compile": result.compile_speedup if cci and cci[0] > 1.0 else None}


def run_drafts(camp: Campaign, flags: dict[str, Any], language: str, *,
               total_time: float | None = None,
               say: Callable[[str, dict[str, Any]], None] | None = None) -> Campaign:
    note = say or (lambda _e, _r: None)
    started = time.monotonic()
    camp.data["stopped"] = None
    folder = camp.path.parent / camp.name
    evaluator = None
    try:
        for row in camp.rows:
            if row["status"] in FINISHED:
                continue
            if total_time is not None and time.monotonic() - started >= total_time:
                camp.data["stopped"] = f"total time budget reached ({total_time:g} s)"
                break
            reason = too_big(row["path"])
            if reason is not None:
                row.update(status="skipped", reason=reason)
                camp.save()
                note("skipped", row)
                continue
            row.update(status="running")
            camp.save()
            note("start", row)

            def evaluate(path: str, candidate: Path) -> Any:
                nonlocal evaluator
                evaluator = evaluator or _evaluator(flags)  # started at the first covered one
                return evaluator.evaluate(path, candidate)

            try:
                row.update(draft_row(evaluate, row["path"], language, folder))
            except ProblemError as exc:
                row.update(status="failed", reason=_first(exc))
            camp.save()
            note(row["status"], row)
    finally:
        if evaluator is not None:
            evaluator.close()
    camp.save()
    return camp
