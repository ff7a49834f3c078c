"""The run summary: one typed, frozen `RunSummary` that `show --json`, the tables and the HTML
report all read; `to_dict()` / `to_json()` give the JSON `show --json` prints (its keys are a
contract: scripts read them)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from kernelevolve.harness.protocol.stages import REJECT_STAGES
from kernelevolve.platforms.machine_facts import machine_lines
from kernelevolve.report.compile_compare import compile_comparison
from kernelevolve.report.timing_notes import judged_interval, timing_line, wide_interval_warning
from kernelevolve.report.tool_traffic import tool_traffic
from kernelevolve.types import EvalResult

STAGE_KEYS = REJECT_STAGES
# Speed-of-light fields of a case (types.CaseResult, harness/protocol/roofline.py)
SOL_KEYS = ("bytes_moved", "flops", "sol_ms", "sol_bound", "sol_fraction", "achieved_gbs",
            "achieved_gflops")
CASE_KEYS = ("name", "weight", "ref_ms", "cand_ms", "speedup", "speedup_ci", "timing_stop",
             *SOL_KEYS)


@dataclass(frozen=True)
class RunSummary:
    """A run as its views read it. Nodes, the best node, the outcome and the funnel are the
    JSON rows `show --json` prints; every field has an empty default (a report of a run that
    has nothing yet)."""

    run_id: str = ""
    status: str | None = None
    problem: str | None = None
    platform: str | None = None
    created: float | None = None
    elapsed_s: float = 0.0
    stop_reason: str | None = None
    outcome: dict[str, Any] | None = None      # the run's stored outcome (search/acceptance.py)
    best: dict[str, Any] | None = None         # node_id, speedup, fitness, interval, sol_fraction
    funnel: dict[str, int] = field(default_factory=dict)
    evaluations: int = 0
    nodes: list[dict[str, Any]] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    llm_failures: dict[str, Any] | None = None
    fingerprint: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    machine: list[str] = field(default_factory=list)
    best_source: str | None = None
    best_cases: list[dict[str, Any]] | None = None
    best_logs: dict[str, str] | None = None
    reference_source: str | None = None
    best_diff: dict[str, Any] | None = None
    synth_coverage: str | None = None
    operators: dict[str, Any] | None = None
    baselines: dict[str, Any] = field(default_factory=dict)
    tool_traffic: list[dict[str, Any]] = field(default_factory=list)
    compile_comparison: dict[str, Any] | None = None  # report/compile_compare.py

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=str)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunSummary":
        """A summary from its JSON (a saved `--json` file); unknown keys are dropped."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def run_summary(run: Any) -> RunSummary:
    rec = run.record
    store = run.store
    outcome = rec.outcome or {}
    evaluations = store.evaluations(run.id)
    nodes = _node_rows(store, run.id, evaluations)
    baselines = _baselines(evaluations)
    ranked = sorted((n for n in nodes if n["stage"] == "accepted" and n["fitness"] is not None),
                    key=lambda n: (-n["fitness"], n["id"]))
    best_id = outcome.get("node_id") if outcome.get("node_id") is not None else (
        ranked[0]["id"] if ranked else None)
    best = best_source = best_cases = best_logs = comparison = None
    if best_id is not None:
        node = next(n for n in nodes if n["id"] == best_id)
        result = _final_result(store, run.id, best_id) or store.evaluation(run.id, best_id)
        best = {"node_id": best_id, "speedup": outcome.get("speedup") or node["speedup"],
                "fitness": node["fitness"],  # the outcome's interval, else the search-time one
                "interval": outcome.get("interval") or _search_interval(node, result),
                "sol_fraction": result.sol_fraction if result else None}
        best_source = store.source(run.id, best_id)
        best_cases = [{k: _plain(getattr(c, k)) for k in CASE_KEYS}
                      for c in (result.cases if result else []) if not c.held_out]
        best_logs = (result.logs if result else None) or None  # inert: harness/protocol/text.py
        comparison = compile_comparison(outcome, result, baselines,
                                        (rec.config or {}).get("baseline", "eager"))
    return RunSummary(
        run_id=run.id, status=rec.status, problem=rec.problem_path, platform=rec.platform,
        created=rec.created, elapsed_s=rec.elapsed_s,
        stop_reason=outcome.get("stop_reason") or _stop_reason(store, run.id),
        outcome=outcome or None, best=best, funnel=store.funnel(run.id),
        evaluations=store.eval_count(run.id), nodes=nodes,
        cost=llm_cost(store, run.id), llm_failures=llm_failures(store, run.id),
        fingerprint=rec.fingerprint or {}, config=rec.config,
        machine=machine_lines(rec.fingerprint),
        best_source=best_source, best_cases=best_cases, best_logs=best_logs,
        reference_source=_source_or_none(store, run.id, 0),
        best_diff=_best_diff(store, run.id, nodes, best_id, best_source),
        synth_coverage=_synth_coverage(store, run.id, nodes),
        operators=operators_used(rec.config or {}, nodes),
        baselines=baselines,
        tool_traffic=tool_traffic(store, run.id),  # the agent's tools, per proposal
        compile_comparison=comparison)


def _plain(value: Any) -> Any:
    """A case's interval as the list its JSON reads back as (from_dict gives the same)."""
    return list(value) if isinstance(value, tuple) else value


def _search_interval(node: dict[str, Any], result: EvalResult | None) -> list[float] | None:
    """The 95% interval of the node's search-time fitness (the judged figure's)."""
    interval, figure = judged_interval(result) if result else (None, None)
    fitness = node.get("fitness")
    if not interval or figure is None or fitness is None or abs(figure - fitness) > 1e-6 * fitness:
        return None
    return [float(interval[0]), float(interval[1])]


def _node_rows(store: Any, run_id: str,
               evaluations: list[tuple[int, EvalResult]]) -> list[dict[str, Any]]:
    """One JSON row per node; the root is the reference (fitness and speedup 1.0)."""
    order = {nid: i for i, (nid, _) in enumerate(evaluations)}
    reasons = {nid: result.reason for nid, result in evaluations}
    rows = []
    for n in store.nodes(run_id):
        root = n.id == 0
        rows.append({"id": n.id, "parents": list(n.parents), "operator": n.operator,
                     "rationale": n.rationale, "stage": None if root else n.stage,
                     "reason": None if root else reasons.get(n.id),
                     "status": "root" if root else n.status,
                     "fitness": 1.0 if root else n.fitness,
                     "speedup": 1.0 if root else n.speedup, "order": order.get(n.id)})
    return rows


def operators_used(config: dict[str, Any], nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The configured operators and how many nodes each one produced."""
    from collections import Counter

    ran = Counter(n["operator"] for n in nodes if n["id"] != 0)
    return {"configured": list(config.get("operators") or []), "ran": dict(ran),
            "baseline": config.get("baseline", "eager")}


def operators_line(ops: dict[str, Any] | None) -> str | None:
    if not ops:
        return None
    ran = ", ".join(f"{op} {count}" for op, count in sorted(ops["ran"].items())) or "none yet"
    return (f"operators: {', '.join(ops['configured']) or '-'} (nodes by operator: {ran}); "
            f"fitness relative to {'torch.compile' if ops.get('baseline') == 'compile' else 'eager PyTorch'}")


def _baselines(evaluations: list[tuple[int, EvalResult]]) -> dict[str, Any]:
    from kernelevolve.search.baselines import figures

    return figures(result for _, result in evaluations)


def _source_or_none(store: Any, run_id: str, node_id: int) -> str | None:
    try:
        return store.source(run_id, node_id)
    except Exception:  # noqa: BLE001 - a pruned object store: the report says "not recorded"
        return None


def _best_diff(store: Any, run_id: str, nodes: list[dict[str, Any]], best_id: int | None,
               best_source: str | None) -> dict[str, Any] | None:
    """The best kernel against its (first) parent, as a unified diff; None when it was drafted
    from the reference itself (a diff against the PyTorch module says nothing)."""
    import difflib

    node = next((n for n in nodes if n["id"] == best_id), None)
    if node is None or best_source is None or not node["parents"] or node["parents"][0] == 0:
        return None
    parent = node["parents"][0]
    before = _source_or_none(store, run_id, parent)
    if before is None:
        return None
    diff = difflib.unified_diff(before.splitlines(keepends=True),
                                best_source.splitlines(keepends=True),
                                fromfile=f"node {parent}", tofile=f"node {best_id}")
    return {"parent": parent, "diff": "".join(diff)}


def _synth_coverage(store: Any, run_id: str, nodes: list[dict[str, Any]]) -> str | None:
    """Which ops the synthesizer fused into which kernels (or why it could not)."""
    lines = [n["rationale"] for n in nodes if n["operator"] == "synth"]
    lines += [f"not covered ({e.data.get('language')}): {e.data.get('reason')}"
              for e in store.events(run_id, "synth_not_covered")[:2]]
    return "\n\n".join(lines) if lines else None


def _final_result(store: Any, run_id: str, node_id: int) -> EvalResult | None:
    # Newest first: a run killed while re-measuring and then resumed measures its finalists
    # again, and its outcome comes from that last session.
    for event in reversed(store.events(run_id, "final_measurement")):
        if event.data.get("node_id") == node_id and event.data.get("result"):
            return EvalResult.from_dict(event.data["result"])
    return None


def _stop_reason(store: Any, run_id: str) -> str | None:
    events = store.events(run_id, "stopped")
    return events[-1].data.get("reason") if events else None


def measurement_notes(s: RunSummary) -> list[str]:
    """What a reader needs to square the figures: the answer is the finalists' re-measurement,
    not the search-time figure the live view showed; how that re-measurement's timing ended;
    a wide interval is said with its width (report/timing_notes.py, as `eval` says it)."""
    outcome = s.outcome or {}
    notes = []
    searched = [n for n in s.nodes if n.get("stage") == "accepted"
                and n.get("fitness") is not None and n.get("id") != 0]
    top = max(searched, key=lambda n: n["fitness"], default=None)
    if outcome.get("speedup") is not None and top is not None:
        notes.append(f"search-time best {top['fitness']:.3f}x (node {top['id']}); the outcome "
                     "is the finalists' re-measurement, longer and paired with the baseline, "
                     "so the two can differ")
    if outcome.get("speedup") is not None:  # best_cases are then the final measurement's
        notes.append(timing_line(s.best_cases or [], (s.config or {}).get("final_timing"),
                                 "re-measurement timing") or "")
    notes.append(wide_interval_warning(outcome.get("interval"), outcome.get("speedup")) or "")
    return [n for n in notes if n]


def llm_failures(store: Any, run_id: str) -> dict[str, Any] | None:
    """Failed LLM calls and replies without usable code, with the last error; None if none."""
    from kernelevolve.run_hooks import first_line

    errors = store.events(run_id, "llm_error")
    unusable = store.events(run_id, "generation_failure")
    if not errors and not unusable:
        return None
    return {"failed_calls": len(errors), "unusable_replies": len(unusable),
            "last_error": first_line(errors[-1].data.get("error"), 300) if errors else None}


def failure_line(failures: dict[str, Any] | None) -> str | None:
    """"LLM: 32 calls failed (last: ...); 2 replies without usable code", or None."""
    if not failures:
        return None
    parts = []
    if failures.get("failed_calls"):
        parts.append(f"{failures['failed_calls']} calls failed"
                     + (f" (last: {failures['last_error']})" if failures.get("last_error") else ""))
    if failures.get("unusable_replies"):
        parts.append(f"{failures['unusable_replies']} replies without usable code")
    return "LLM: " + "; ".join(parts)


def count_retries(m: dict[str, Any], call: dict[str, Any]) -> None:
    """Add one stored llm_call's re-sends (by cause) and failure cause to a model's counts."""
    retries = call.get("retries") or []
    m["retried"] += bool(retries)
    for entry in retries:
        why = str(entry.get("why") or "?")
        m["resent"][why] = m["resent"].get(why, 0) + 1
    if call.get("error"):
        why = str(call.get("failure") or "error")
        m["why_failed"][why] = m["why_failed"].get(why, 0) + 1


def _causes(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {why}" for why, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def calls_line(cost: dict[str, Any] | None) -> str | None:
    """"LLM: 12 calls, 0 failed; 2 retried (1 timeout after 600 s, 1 HTTP 529)", or None
    without calls: every failure and every re-send said with its cause, never a bare
    "0 failed" over retries."""
    models = list(((cost or {}).get("by_model") or {}).values())
    calls = sum(m.get("calls", 0) for m in models)
    if not calls:
        return None
    failed = sum(m.get("failed", 0) for m in models)
    why_failed: dict[str, int] = {}
    resent: dict[str, int] = {}
    for m in models:
        for mine, total in ((m.get("why_failed") or {}, why_failed), (m.get("resent") or {},
                                                                      resent)):
            for why, n in mine.items():
                total[why] = total.get(why, 0) + n
    line = f"LLM: {calls} call{'s' if calls != 1 else ''}, {failed} failed"
    if failed and why_failed:
        line += f" ({_causes(why_failed)})"
    retried = sum(m.get("retried", 0) for m in models)
    line += f"; {retried} retried"
    if resent:
        n = sum(resent.values())
        line += f" ({'' if n == retried else f'{n} re-sends: '}{_causes(resent)})"
    return line


def llm_cost(store: Any, run_id: str) -> dict[str, Any]:
    """Tokens and dollars per model from the stored LLM calls; an unpriced model's dollars are
    None ("unknown"), never 0."""
    by_model: dict[str, dict[str, Any]] = {}
    for event in store.events(run_id, "llm_call"):
        d = event.data
        key = f"{d.get('provider')}:{d.get('model')}"
        m = by_model.setdefault(key, {"calls": 0, "failed": 0, "tokens_in": 0, "tokens_out": 0,
                                      "dollars": 0.0, "retried": 0, "resent": {}, "why_failed": {}})
        m["calls"] += 1
        m["failed"] += bool(d.get("error"))
        count_retries(m, d)
        m["tokens_in"] += int(d.get("tokens_in") or 0)
        m["tokens_out"] += int(d.get("tokens_out") or 0)
        if d.get("cost_usd") is None:
            if not d.get("error"):
                m["dollars"] = None
        elif m["dollars"] is not None:
            m["dollars"] += float(d["cost_usd"])
    tokens = sum(m["tokens_in"] + m["tokens_out"] for m in by_model.values())
    known = [m["dollars"] for m in by_model.values()]
    dollars = None if any(v is None for v in known) else sum(known)
    return {"tokens": tokens, "dollars": dollars, "by_model": by_model}
