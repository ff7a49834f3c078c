"""The run summary: one dict that `show --json`, the tables and the HTML report all read."""
from __future__ import annotations

from typing import Any

STAGE_KEYS = ("static", "load", "run", "correctness", "integrity", "timing")


def run_summary(run: Any) -> dict[str, Any]:
    rec = run.record
    store = run.store
    outcome = rec.outcome or {}
    nodes = []
    order = {nid: i for i, (nid, _) in enumerate(store.evaluations(run.id))}
    for n in store.nodes(run.id):
        root = n.id == 0
        nodes.append({"id": n.id, "parents": list(n.parents), "operator": n.operator,
                      "rationale": n.rationale, "stage": None if root else n.stage,
                      "status": "root" if root else n.status,
                      "fitness": 1.0 if root else n.fitness,
                      "speedup": 1.0 if root else n.speedup, "order": order.get(n.id)})
    ranked = sorted((n for n in nodes if n["stage"] == "accepted" and n["fitness"] is not None),
                    key=lambda n: (-n["fitness"], n["id"]))
    best_id = outcome.get("node_id") if outcome.get("node_id") is not None else (
        ranked[0]["id"] if ranked else None)
    best = None
    best_source = best_cases = None
    if best_id is not None:
        node = next(n for n in nodes if n["id"] == best_id)
        best = {"node_id": best_id, "speedup": outcome.get("speedup") or node["speedup"],
                "fitness": node["fitness"], "interval": outcome.get("interval")}
        best_source = store.source(run.id, best_id)
        result = _final_result(store, run.id, best_id) or store.evaluation(run.id, best_id) or {}
        best_cases = [{k: c.get(k) for k in ("name", "weight", "ref_ms", "cand_ms", "speedup")}
                      for c in result.get("cases", []) if not c.get("held_out")]
    return {
        "run_id": run.id, "status": rec.status, "problem": rec.problem_path,
        "platform": rec.platform, "created": rec.created, "elapsed_s": rec.elapsed_s,
        "stop_reason": outcome.get("stop_reason") or _stop_reason(store, run.id),
        "outcome": outcome or None, "best": best, "funnel": store.funnel(run.id),
        "evaluations": store.eval_count(run.id), "nodes": nodes,
        "cost": llm_cost(store, run.id),
        "fingerprint": rec.fingerprint or {}, "config": rec.config,
        "best_source": best_source, "best_cases": best_cases,
        "synth_coverage": _synth_coverage(store, run.id, nodes),
    }


def _synth_coverage(store: Any, run_id: str, nodes: list[dict[str, Any]]) -> str | None:
    """Which ops the synthesizer fused into which kernels (or why it could not)."""
    lines = [n["rationale"] for n in nodes if n["operator"] == "synth"]
    lines += [f"not covered ({e.data.get('language')}): {e.data.get('reason')}"
              for e in store.events(run_id, "synth_not_covered")[:2]]
    return "\n\n".join(lines) if lines else None


def _final_result(store: Any, run_id: str, node_id: int) -> dict[str, Any] | None:
    # Newest first: a run killed while re-measuring and then resumed measures its finalists
    # again, and its outcome comes from that last session.
    for event in reversed(store.events(run_id, "final_measurement")):
        if event.data.get("node_id") == node_id:
            return event.data.get("result")
    return None


def _stop_reason(store: Any, run_id: str) -> str | None:
    events = store.events(run_id, "stopped")
    return events[-1].data.get("reason") if events else None


def llm_cost(store: Any, run_id: str) -> dict[str, Any]:
    """Tokens and dollars per model from the stored LLM calls; an unpriced model's dollars are
    None ("unknown"), never 0."""
    by_model: dict[str, dict[str, Any]] = {}
    for event in store.events(run_id, "llm_call"):
        d = event.data
        key = f"{d.get('provider')}:{d.get('model')}"
        m = by_model.setdefault(key, {"calls": 0, "failed": 0, "tokens_in": 0, "tokens_out": 0,
                                      "dollars": 0.0})
        m["calls"] += 1
        m["failed"] += bool(d.get("error"))
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
