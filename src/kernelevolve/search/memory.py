"""Search memory: a compact, token-budgeted account of what the run has tried.

The paper's context-memory sub-agent, without an LLM: built from the graph after every
evaluation, stored with the run, and put into every LLM prompt so that parallel proposals do
not rediscover the same dead ends. It keeps the improvement path (what changed, what it
gained), the failures grouped by gate with their most common reasons, and the counts.
"""
from __future__ import annotations

from collections import Counter, defaultdict

from kernelevolve.search.graph import SearchGraph

CHARS_PER_TOKEN = 4  # a rough, conservative ratio for English and code


def _first_line(text: str, limit: int = 160) -> str:
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def summarize(graph: SearchGraph, budget_tokens: int = 600) -> str:
    evaluated = graph.evaluated()
    if not evaluated:
        return "Nothing evaluated yet."
    accepted = [n for n in evaluated if n.accepted]
    best = graph.best()
    lines = [f"{len(evaluated)} candidates evaluated: {len(accepted)} accepted, "
             f"{len(evaluated) - len(accepted)} rejected."]
    if best is not None:
        lines.append(f"Best so far: node {best.id} ({best.operator}) at {best.fitness:.3f}x over "
                     "eager PyTorch.")
    running = 0.0
    path = []
    for node in evaluated:  # completion order
        if node.accepted and node.fitness and node.fitness > running:
            path.append(f"- node {node.id} ({node.operator}) {node.fitness:.3f}x: "
                        f"{_first_line(node.rationale, 120)}")
            running = node.fitness
    if path:
        lines.append("Improvements, in order (each beat the best before it):")
        lines.extend(path[-6:])
    failures: dict[str, list] = defaultdict(list)
    for node in evaluated:
        if node.buggy:
            failures[node.stage or "?"].append(node)
    if failures:
        lines.append("Rejections by gate (most common reason first; do not repeat these):")
        for stage, nodes in sorted(failures.items(), key=lambda kv: -len(kv[1])):
            reasons = Counter(_first_line(n.meta.get("reason", ""), 140) for n in nodes)
            reason, count = reasons.most_common(1)[0]
            ids = ", ".join(str(n.id) for n in nodes[-4:])
            lines.append(f"- {stage} x{len(nodes)} (nodes {ids}): {reason}"
                         + (f" (and {len(reasons) - 1} other reasons)" if len(reasons) > 1 else ""))
    by_op = Counter(n.operator for n in evaluated)
    lines.append("Tried by operator: " + ", ".join(f"{op} {c}" for op, c in by_op.most_common()))
    return _fit(lines, budget_tokens * CHARS_PER_TOKEN)


def _fit(lines: list[str], budget_chars: int) -> str:
    """Keep the head (counts, best) and as many of the following lines as fit."""
    out, used = [], 0
    for line in lines:
        if used + len(line) + 1 > budget_chars:
            out.append("… (memory truncated to its token budget)")
            break
        out.append(line)
        used += len(line) + 1
    return "\n".join(out)
