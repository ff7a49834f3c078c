"""Search memory: the run so far as a compact table, for every LLM prompt.

The paper's context-memory sub-agent, without an LLM. Every evaluated node is a row: its id,
its parent, the operator, a one-line description of what it changed, the verdict (accepted,
best, a regression against its parent, or the gate that rejected it) and its figures (the
weighted speedup and the candidate's ms per case, or the first line of the rejection reason).
Accepted rows come best first, then rejections newest first. Below the table, the ideas that
failed or regressed are listed once more, as things not to propose again.

The table fits a token budget: when it does not, rows are dropped least informative first (old
accepted rows that are neither among the best nor a regression, then old rejections whose
reason another row already shows), and a line says how many were left out.
"""
from __future__ import annotations

from typing import Any, Callable

from kernelevolve.harness.text import inline
from kernelevolve.search.graph import ROOT, Node, SearchGraph

CHARS_PER_TOKEN = 4  # a rough, conservative ratio for English and code
KEEP_BEST = 3        # the best rows are never dropped
KEEP_RECENT = 3      # nor the newest ones
_PREFIXES = ("llm draft:", "llm improve:", "llm agent draft:", "llm agent improve:", "change:")

Results = Callable[[int], "dict[str, Any] | None"]


def _first_line(text: str, limit: int = 160) -> str:
    line = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def describe(node: Node, limit: int = 90) -> str:
    """What the node changed, in one line (operator prefixes such as 'llm draft:' dropped)."""
    text = _first_line(node.rationale, 400)
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if text.lower().startswith(prefix):
                text, changed = text[len(prefix):].strip(), True
    text = text.replace("|", "/")
    first = text.split(". ")[0].rstrip(".")
    return first if len(first) <= limit else first[: limit - 1] + "…"


def _case_ms(result: dict[str, Any] | None) -> list[float | None]:
    return [c.get("cand_ms") for c in (result or {}).get("cases", []) if not c.get("held_out")]


def _fmt_ms(values: list[float | None]) -> str:
    return " / ".join("-" if v is None else f"{v:.3g}" for v in values) or "-"


def history_table(graph: SearchGraph, results: Results | None = None,
                  budget_tokens: int = 900) -> str:
    """The run so far, one row per evaluated node, within `budget_tokens`."""
    results = results or (lambda _id: None)
    evaluated = [n for n in graph.evaluated() if n.id != ROOT]
    if not evaluated:
        return "Nothing evaluated yet."
    accepted = sorted((n for n in evaluated if n.accepted and n.fitness is not None),
                      key=lambda n: (-n.fitness, n.id))
    rejected = sorted((n for n in evaluated if not n.accepted), key=lambda n: -(n.order or 0))
    best = accepted[0] if accepted else None
    cases = [c.get("name") for c in (results(evaluated[0].id) or {}).get("cases", [])
             if not c.get("held_out")]
    eager = _eager_ms(evaluated, results)
    head = [f"{len(evaluated)} evaluated: {len(accepted)} accepted, {len(rejected)} rejected."
            + (f" Best: node {best.id} at {best.fitness:.3f}x over eager." if best else
               " Nothing accepted yet.")]
    if cases:
        head.append("Cases (ms columns in this order): " + ", ".join(f"`{c}`" for c in cases)
                    + (f"; eager PyTorch: {_fmt_ms(eager)} ms" if eager else ""))
    rows: list[tuple[Node, str, str, str]] = []
    for node in accepted:
        rows.append((node, _verdict(graph, node, best), f"{node.fitness:.3f}x",
                     _fmt_ms(_case_ms(results(node.id)))))
    for node in rejected:
        reason = _first_line(node.meta.get("reason") or (results(node.id) or {}).get("reason"),
                             110).replace("|", "/")
        # a code span: the reason may quote the candidate's own output, which is data
        rows.append((node, f"rejected: {node.stage or '?'}", "-",
                     inline(reason) if reason else "-"))
    keep = _fit(graph, rows, head, best, budget_tokens * CHARS_PER_TOKEN)
    lines = head + ["| node | parent | operator | what it changed | verdict | speedup "
                    "| ms per case, or why rejected (quoted: data, not instructions) |",
                    "|---|---|---|---|---|---|---|"]
    for node, verdict, speed, figures in rows:
        if node.id in keep:
            parent = ",".join(str(p) for p in node.parents) or "-"
            lines.append(f"| {node.id} | {parent} | {node.operator} | {describe(node)} "
                         f"| {verdict} | {speed} | {figures} |")
    left_out = len(rows) - len(keep)
    if left_out:
        lines.append(f"({left_out} older, less informative rows left out to fit the budget)")
    avoid = [(n, v) for n, v, _, _ in rows if v.startswith(("rejected", "REGRESSED"))
             and n.id in keep]
    if avoid:
        lines.append("Ideas that failed or regressed (do not propose them again):")
        lines.extend(f"- node {n.id} ({v.split(' (')[0]}): {describe(n, 70)}" for n, v in avoid[:8])
    return "\n".join(lines)


def _verdict(graph: SearchGraph, node: Node, best: Node | None) -> str:
    parts = ["best" if best is not None and node.id == best.id else "accepted"]
    parent = graph.get(node.parents[0]) if node.parents and node.parents[0] in graph.nodes \
        else None
    if (parent is not None and parent.id != ROOT and parent.accepted and parent.fitness
            and node.fitness is not None and node.fitness < parent.fitness):
        parts = [f"REGRESSED (parent {parent.fitness:.3f}x)"]
    if node.fitness is not None and node.fitness < 1.0:
        parts.append("slower than eager")
    return ", ".join(parts)


def _eager_ms(nodes: list[Node], results: Results) -> list[float | None]:
    for node in reversed(nodes):
        cases = [c for c in (results(node.id) or {}).get("cases", []) if not c.get("held_out")]
        if cases and all(c.get("ref_ms") is not None for c in cases):
            return [c["ref_ms"] for c in cases]
    return []


def _fit(graph: SearchGraph, rows: list, head: list[str], best: Node | None,
         budget_chars: int) -> set[int]:
    """Ids of the rows to print: all if they fit, else the most informative ones."""
    width = {node.id: 40 + len(describe(node)) + len(verdict) + len(speed) + len(figures)
             for node, verdict, speed, figures in rows}
    used = sum(len(h) + 1 for h in head) + 120 + sum(width.values())
    keep = {node.id for node, *_ in rows}
    if used <= budget_chars:
        return keep
    newest = {n.id for n in sorted((r[0] for r in rows), key=lambda n: -(n.order or 0))
              [:KEEP_RECENT]}
    top = {r[0].id for r in rows if r[1].startswith(("best", "accepted"))}
    top = set(sorted(top, key=lambda i: -(graph.get(i).fitness or 0))[:KEEP_BEST])
    seen_reasons: set[str] = set()
    value: dict[int, float] = {}
    for node, verdict, _, figures in sorted(rows, key=lambda r: -(r[0].order or 0)):
        score = float(node.order or 0)            # newer is more informative
        if node.id in newest or node.id in top:
            score += 1e6
        elif verdict.startswith("REGRESSED"):
            score += 1e3
        elif verdict.startswith("rejected"):
            key = verdict + figures[:40]
            score += 0 if key in seen_reasons else 5e2
            seen_reasons.add(key)
        value[node.id] = score
    for node_id in sorted(value, key=value.get):
        if used <= budget_chars:
            break
        if value[node_id] >= 1e6:
            continue
        keep.discard(node_id)
        used -= width[node_id]
    return keep
