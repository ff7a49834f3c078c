"""The operator x platform correctness matrix of a suite, across every campaign that ran it.

Rows are probes (grouped by operator), columns platform/language ("cpu/cpp",
"cpu/triton-interpreter", "cuda/triton"; "... search" for campaigns that optimized); every campaign of the suite in the workspace's
benches/ contributes the cells of its column, so C++ and Triton runs made separately land in
one matrix. Per cell, a finished row beats a pending one, then the most recently updated
campaign wins. A cell is correct (with the measured speedup over eager, or untimed where the
platform cannot time the language), rejected (the gate and the reason), not covered (the
synthesizer's reason), error (the synthesizer or the problem failed), or pending.

Totals per column: covered share (probes the synthesizer drafted a kernel for), correct share
of the covered, and the share of the timed correct probes that are faster than eager (the
point estimate; "safely" when the 95% interval clears 1).
"""
from __future__ import annotations

import json
import math
from html import escape
from pathlib import Path
from typing import Any

STATES = ("correct", "rejected", "not_covered", "error", "pending")


def column_label(platform: str, language: str, mode: str = "draft") -> str:
    from kernelevolve.errors import PlatformError
    from kernelevolve.plugins import get_platform

    try:
        interp = language in get_platform(platform).interpreted_languages
    except PlatformError:  # a campaign from a platform not registered here
        interp = False
    return f"{platform}/{language}" + ("-interpreter" if interp else "") + (
        " search" if mode == "search" else "")


def collect(workspace: Path, suite: str) -> list[dict[str, Any]]:
    """The stored campaigns of `suite` in the workspace (unreadable ones are skipped)."""
    out = []
    for path in sorted((Path(workspace) / "benches").glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and (data.get("suite") or {}).get("name") == suite:
            out.append(data)
    return out


def cell(row: dict[str, Any]) -> dict[str, Any]:
    status, verdict = row.get("status"), row.get("verdict")
    if status in ("pending", "running"):
        return {"state": "pending"}
    if status in ("failed", "skipped") or verdict == "synth_error":
        return {"state": "error", "reason": row.get("reason") or status}
    if verdict in ("not_covered", "nothing_to_search"):  # a draft's, or a search's, verdict
        return {"state": "not_covered", "reason": row.get("reason") or row.get("message")}
    plan = row.get("plan") or ""
    out = {"partial": "torch:" in plan, "plan": plan}
    if verdict == "correct" or (verdict != "rejected" and row.get("correct")):
        return {**out, "state": "correct", "speedup": row.get("measured_speedup"),
                "safe": bool(row.get("safe")), "interval": row.get("interval")}
    return {**out, "state": "rejected", "reason": row.get("reason")}


def build(campaigns: list[dict[str, Any]]) -> dict[str, Any]:
    chosen: dict[tuple[str, str], tuple[tuple, dict[str, Any]]] = {}
    ops: dict[str, str] = {}
    order: list[str] = []
    profiles: dict[str, set[str]] = {}
    for camp in campaigns:
        meta = camp.get("suite") or {}
        label = column_label(meta.get("platform", "cpu"), meta.get("language", "?"),
                             camp.get("mode", "draft"))
        for row in camp.get("rows", []):
            probe = row["problem"]
            if probe not in ops:
                order.append(probe)
            ops[probe] = row.get("op") or ops.get(probe) or probe
            c = cell(row)
            rank = (c["state"] != "pending", camp.get("updated") or 0)
            if (label, probe) not in chosen or rank > chosen[(label, probe)][0]:
                chosen[(label, probe)] = (rank, {**c, "profile": meta.get("profile")})
    columns = sorted({label for label, _ in chosen}, key=_column_order)
    for (label, _), (_, c) in chosen.items():
        profiles.setdefault(label, set()).add(c.get("profile") or "?")
    rows = [{"probe": p, "op": ops[p],
             "cells": {col: chosen[(col, p)][1] for col in columns if (col, p) in chosen}}
            for p in sorted(order, key=lambda p: (ops[p], order.index(p)))]
    return {"columns": [{"label": c, "profile": "+".join(sorted(profiles[c]))} for c in columns],
            "rows": rows, "totals": {c: totals(rows, c) for c in columns}}


def _column_order(label: str) -> tuple:
    return (not label.startswith("cpu/"), label)


def totals(rows: list[dict[str, Any]], column: str) -> dict[str, Any]:
    cells = [(r["op"], r["cells"][column]) for r in rows if column in r["cells"]]
    n = len(cells)
    count = {s: sum(1 for _, c in cells if c["state"] == s) for s in STATES}
    covered = count["correct"] + count["rejected"]
    timed = [c["speedup"] for _, c in cells if c["state"] == "correct" and c.get("speedup")]
    faster = sum(1 for s in timed if s > 1.0)
    safely = sum(1 for _, c in cells if c["state"] == "correct" and c.get("safe"))
    by_op: dict[str, list[str]] = {}
    for op, c in cells:
        by_op.setdefault(op, []).append(c["state"])
    return {
        "probes": n, **count, "covered": covered,
        "covered_share": covered / n if n else 0.0,
        "correct_share_of_covered": count["correct"] / covered if covered else None,
        "timed": len(timed), "faster": faster, "safely_faster": safely,
        "faster_share_of_timed": faster / len(timed) if timed else None,
        "faster_share": faster / n if n else 0.0,
        "geomean_speedup": math.exp(sum(math.log(s) for s in timed) / len(timed))
        if timed else None,
        "ops": len(by_op),
        "ops_covered": sum(1 for s in by_op.values() if "correct" in s or "rejected" in s),
        "ops_all_correct": sum(1 for s in by_op.values()
                               if "correct" in s and "rejected" not in s),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def total_lines(matrix: dict[str, Any]) -> list[str]:
    lines = []
    for col in matrix["columns"]:
        t = matrix["totals"][col["label"]]
        geo = f", geomean {t['geomean_speedup']:.2f}x" if t["geomean_speedup"] else ""
        lines.append(
            f"{col['label']} ({col['profile']}): {t['probes']} probes, covered "
            f"{t['covered']} ({_pct(t['covered_share'])}); correct {t['correct']} "
            f"({_pct(t['correct_share_of_covered'])} of covered), rejected {t['rejected']}, "
            f"not covered {t['not_covered']}, errors {t['error']}, pending {t['pending']}; "
            f"faster than eager {t['faster']} of {t['timed']} timed "
            f"({_pct(t['faster_share_of_timed'])}; safely {t['safely_faster']}){geo}; "
            f"operators: {t['ops_covered']} of {t['ops']} covered, {t['ops_all_correct']} "
            "with every covered probe correct")
    return lines


def short(c: dict[str, Any] | None) -> tuple[str, str]:
    """(text, rich style) of a cell in the printed matrix."""
    if c is None:
        return "", ""
    state = c["state"]
    if state == "correct":
        part = "*" if c.get("partial") else ""
        if c.get("speedup") is None:
            return "ok" + part, "green"
        return f"ok {c['speedup']:.2f}x{part}", "green" if c["speedup"] > 1 else "yellow"
    if state == "rejected":
        return "REJ " + (c.get("reason") or "").split(":")[0], "bold red"
    return {"not_covered": ("n/c", "dim"), "error": ("ERROR", "bold magenta"),
            "pending": ("...", "dim")}[state]


def reason_groups(matrix: dict[str, Any], column: str, state: str) -> list[tuple[str, int]]:
    """Reasons of `state` cells in a column grouped by their text before the first colon."""
    groups: dict[str, int] = {}
    for r in matrix["rows"]:
        c = r["cells"].get(column)
        if c and c["state"] == state:
            key = (c.get("reason") or "?").split(":")[0][:80]
            groups[key] = groups.get(key, 0) + 1
    return sorted(groups.items(), key=lambda kv: (-kv[1], kv[0]))


def html_section(matrix: dict[str, Any]) -> str:
    colors = {"correct": "#dcfce7", "rejected": "#fecaca", "not_covered": "#f3f4f6",
              "error": "#f5d0fe", "pending": "#ffffff"}
    cols = [c["label"] for c in matrix["columns"]]
    head = "".join(f"<th>{escape(c['label'])}<br><small>{escape(c['profile'])}</small></th>"
                   for c in matrix["columns"])
    body = []
    for r in matrix["rows"]:
        tds = []
        for col in cols:
            c = r["cells"].get(col)
            text = short(c)[0]
            tip = (c or {}).get("reason") or (c or {}).get("plan") or ""
            bg = colors[c["state"]] if c else "#ffffff"
            tds.append(f"<td style='background:{bg}' title='{escape(tip, quote=True)}'>"
                       f"{escape(text)}</td>")
        body.append(f"<tr><td>{escape(r['op'])}</td><td>{escape(r['probe'])}</td>"
                    + "".join(tds) + "</tr>")
    lines = "".join(f"<li>{escape(line)}</li>" for line in total_lines(matrix))
    return ("<h2>Operator x platform matrix</h2><p>ok: correct (speedup over eager; * part "
            "of the probe stays in torch), REJ: rejected at that gate, n/c: not covered by "
            "the synthesizer (hover for the reason).</p>"
            f"<ul>{lines}</ul><table><tr><th>operator</th><th>probe</th>{head}</tr>"
            + "".join(body) + "</table>")


def print_matrix(matrix: dict[str, Any], file: Any = None) -> None:
    """The matrix as a rich table on stdout, then the totals, every rejection with its
    reason, and the not-covered reasons grouped."""
    import sys

    from rich.console import Console
    from rich.table import Table

    cols = [c["label"] for c in matrix["columns"]]
    heads = [f"{c['label']} ({c['profile']})" for c in matrix["columns"]]
    texts = [[short(r["cells"].get(col))[0] for col in cols] for r in matrix["rows"]]
    widths = [max([len(h)] + [len(t[i]) for t in texts]) for i, h in enumerate(heads)]
    op_w = max([8] + [len(r["op"]) for r in matrix["rows"]])
    probe_w = max([5] + [len(r["probe"]) for r in matrix["rows"]])
    width = min(260, op_w + probe_w + sum(widths) + 3 * (len(cols) + 2) + 4)
    console = Console(file=file or sys.stdout, width=max(width, 80), highlight=False,
                      soft_wrap=False)
    console.print("operator x platform matrix (ok: correct, with the speedup over eager; * part "
                  "of the probe stays in torch; REJ: rejected at that gate; n/c: not covered)",
                  soft_wrap=True)
    table = Table()
    table.add_column("OPERATOR", no_wrap=True)
    table.add_column("PROBE", no_wrap=True)
    for head in heads:
        table.add_column(head, no_wrap=True)
    for r in matrix["rows"]:
        cells = [short(r["cells"].get(col)) for col in cols]
        table.add_row(r["op"], r["probe"], *[f"[{s}]{escape_markup(t)}[/]" if s else t
                                             for t, s in cells])
    console.print(table)
    for line in total_lines(matrix):
        console.print(line, soft_wrap=True)
    for col in cols:
        bad = [(r["probe"], r["cells"][col]) for r in matrix["rows"]
               if r["cells"].get(col, {}).get("state") in ("rejected", "error")]
        for probe, c in bad:
            console.print(f"{col} {c['state']} {probe}: {escape_markup(c.get('reason') or '')}",
                          soft_wrap=True)
        groups = reason_groups(matrix, col, "not_covered")
        if groups:
            console.print(f"{col} not covered, by reason: " + "; ".join(
                f"{escape_markup(k)} x{n}" for k, n in groups[:10]), soft_wrap=True)


def escape_markup(text: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(text)
