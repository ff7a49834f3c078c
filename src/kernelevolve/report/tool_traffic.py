"""The agent's tool traffic (`--agent`), per proposal: for `show` and the HTML report.

Read from the `agent_tools` events (operators/agent.py stores one per proposal, submitted or
not): each tool call with its case, verdict, speedup over eager and the paired comparison with
its interval, and its seconds. The submitted candidate is matched to its node by source hash.
Everything here came from a model or a candidate's run, so it is cleaned before it is shown.
"""
from __future__ import annotations

from typing import Any

from kernelevolve.harness.protocol.text import clean


def tool_traffic(store: Any, run_id: str) -> list[dict[str, Any]]:
    """One row per agent proposal, in order: parent, node (when submitted and stored), turns,
    outcome, rationale or reason, and the calls."""
    nodes = {n.source_hash: n.id for n in store.nodes(run_id)}
    rows = []
    for event in store.events(run_id, "agent_tools"):
        d = event.data or {}
        rows.append({"proposal": d.get("proposal"), "parent": d.get("parent"),
                     "node": nodes.get(d.get("source_hash")) if d.get("source_hash") else None,
                     "turns": d.get("turns"), "outcome": d.get("outcome"),
                     "rationale": d.get("rationale"), "reason": d.get("reason"),
                     "calls": [c for c in d.get("calls") or [] if isinstance(c, dict)]})
    return rows


def call_text(call: dict[str, Any]) -> str:
    """`time tail_1001: passed, 3.12x over eager [2.95-3.30]; 1.05x the parent (node 1)
    [0.98-1.11]; 12.3 s`."""
    head = str(call.get("tool") or "?") + (f" {call['case']}" if call.get("case") else "")
    parts = [str(call.get("verdict") or "-")]
    if call.get("error"):
        parts[0] += f" ({_short(call['error'], 120)})"
    if call.get("speedup") is not None:
        parts.append(f"{call['speedup']:.3g}x over eager{_interval(call.get('interval'))}")
    if call.get("ratio") is not None:
        parts.append(f"{call['ratio']:.3f}x {call.get('against') or 'the base'}"
                     f"{_interval(call.get('ratio_interval'), '.3f')}"
                     + (" (not paired: its earlier figure)" if call.get("paired") is False
                        else ""))
    if call.get("seconds") is not None:
        parts.append(f"{call['seconds']:.1f} s")
    return clean(f"{head}: " + "; ".join(parts))


def proposal_text(row: dict[str, Any]) -> str:
    parent = "a draft" if row.get("parent") is None else f"from node {row['parent']}"
    end = (f"-> node {row['node']}" if row.get("node") is not None else
           "submitted" if row.get("outcome") == "submitted" else
           f"no candidate ({_short(row.get('reason') or '', 100)})")
    return clean(f"proposal {row.get('proposal')}, {parent}, {row.get('turns')} turn(s), "
                 f"{len(row['calls'])} call(s) {end}")


def traffic_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The text view: a line per proposal, then one per call, then the submit rationale."""
    lines = []
    for row in rows:
        lines.append("  " + proposal_text(row))
        lines += ["    " + call_text(c) for c in row["calls"]]
        if row.get("rationale"):
            lines.append("    rationale: " + _short(row["rationale"], 600))
    return lines


def traffic_html(rows: list[dict[str, Any]], esc: Any) -> str:
    items = []
    for row in rows:
        calls = "".join(f"<li class='mono'>{esc(call_text(c))}</li>" for c in row["calls"])
        why = (f"<p>{esc(_short(row['rationale'], 2000))}</p>" if row.get("rationale") else "")
        items.append(f"<li>{esc(proposal_text(row))}<ul>{calls}</ul>{why}</li>")
    return "<ul>" + "".join(items) + "</ul>"


def _interval(ci: Any, spec: str = ".3g") -> str:
    if not (isinstance(ci, (list, tuple)) and len(ci) == 2):
        return ""
    return f" [{ci[0]:{spec}}-{ci[1]:{spec}}]"


def _short(text: Any, n: int) -> str:
    text = " ".join(clean(str(text or "")).split())
    return text if len(text) <= n else text[:n] + " …"
