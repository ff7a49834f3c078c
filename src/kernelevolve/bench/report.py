"""A bench as text (a table and the summary lines), JSON, and one self-contained HTML page:
the per-problem table, a bar plot of speedups over eager and over torch.compile (log scale),
and the suite's rejection funnel (report/svg.py)."""
from __future__ import annotations

import math
from html import escape
from typing import Any

from kernelevolve.bench.metrics import P_VALUES


def _x(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}x"


def table_rows(rows: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    out = [("PROBLEM", "STATUS", "VERDICT", "OVER EAGER", "OVER COMPILE", "EVALS", "RUN / WHY")]
    for r in rows:
        verdict = r.get("verdict") or "-"
        why = r.get("run_id") or ""
        if r.get("status") in ("skipped", "failed") or not r.get("correct"):
            why = (r.get("reason") or why or "")[:90]
        eager = _x(r.get("speedup"))
        if r.get("speedup") is None and r.get("measured_speedup") is not None:
            eager = f"({_x(r['measured_speedup'])}, not safe)"
        out.append((r["problem"], r["status"], verdict, eager,
                    _x(r.get("speedup_compile")), str(r.get("evals") or "-"), why))
    return out


def summary_lines(s: dict[str, Any]) -> list[str]:
    def fp(d: dict[str, float]) -> str:
        return "  ".join(f"fast_{p:g} {d[f'fast_{p:g}']:.0%}" for p in P_VALUES)

    lines = [f"{s['problems']} problems: {s['done']} done, {s['skipped']} skipped, "
             f"{s['failed']} failed, {s['pending']} not finished",
             f"correct {s['correct_rate']:.0%}; safely improved {s['improved_share']:.0%}; "
             f"no safe improvement {s['no_improvement_share']:.0%}",
             f"over eager:         {fp(s['over_eager'])}",
             f"over torch.compile: {fp(s['over_compile'])}  (compile timed on "
             f"{s['compile_timed']} problems)"]
    f = s.get("funnel") or {}
    if f:
        lines.append("search cost: " + ", ".join(f"{k} {v}" for k, v in sorted(f.items()) if v)
                     + f"; {s['evaluations']} evaluations, {s['wall_s']:.0f} s of search")
    return lines


def _bars(rows: list[dict[str, Any]]) -> str:
    shown = [r for r in rows if r.get("speedup")]
    if not shown:
        return "<p>No problem has a measured speedup yet.</p>"
    lo = min(min(r["speedup"], r.get("speedup_compile") or r["speedup"]) for r in shown)
    hi = max(max(r["speedup"], r.get("speedup_compile") or r["speedup"]) for r in shown)
    lo, hi = min(lo, 0.5), max(hi, 2.0)
    W, label_w, row_h = 960, 200, 22
    H = row_h * len(shown) + 30
    span = math.log(hi) - math.log(lo)

    def xpos(v: float) -> float:
        return label_w + (W - label_w - 20) * (math.log(v) - math.log(lo)) / span

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="100%" '
           'role="img" aria-label="speedups">',
           f'<line x1="{xpos(1.0):.1f}" y1="0" x2="{xpos(1.0):.1f}" y2="{H - 20}" '
           'stroke="#111" stroke-dasharray="4 3"/>']
    for i, r in enumerate(shown):
        y = 4 + i * row_h
        out.append(f'<text x="{label_w - 8}" y="{y + 14}" text-anchor="end" font-size="12">'
                   f'{escape(r["problem"])}</text>')
        for j, (key, color) in enumerate((("speedup", "#16a34a"), ("speedup_compile", "#2563eb"))):
            v = r.get(key)
            if v:
                x0, x1 = sorted((xpos(1.0), xpos(v)))
                out.append(f'<rect x="{x0:.1f}" y="{y + 2 + 9 * j}" width="{max(x1 - x0, 1):.1f}" '
                           f'height="8" fill="{color}"><title>{escape(key)} {v:.2f}x</title></rect>')
    for tick in (0.5, 1.0, 2.0, 4.0, 8.0):
        if lo <= tick <= hi:
            out.append(f'<text x="{xpos(tick):.1f}" y="{H - 6}" text-anchor="middle" '
                       f'font-size="11">{tick:g}x</text>')
    out.append("</svg>")
    return "".join(out)


_STYLE = ("body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:"
          "1px solid #ddd;padding:3px 8px;font-size:13px;text-align:left}")


def html_page(camp: dict[str, Any], summary: dict[str, Any] | None, extra: str = "") -> str:
    """The bench's page; `extra` (HTML: a suite's operator matrix) goes after the summary.
    Without a summary, the page holds only the title and `extra`."""
    from kernelevolve.report.svg import funnel_svg

    head = ("<!doctype html><html><head><meta charset='utf-8'><title>kernelevolve bench "
            f"{escape(camp['name'])}</title><style>{_STYLE}</style></head><body>"
            f"<h1>bench {escape(camp['name'])}</h1>")
    if summary is None:
        return head + extra + "</body></html>"
    cols = "".join(f"<th>{escape(c)}</th>" for c in table_rows([])[0])
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in table_rows(camp["rows"])[1:])
    lines = "".join(f"<li>{escape(line)}</li>" for line in summary_lines(summary))
    return (head + f"<ul>{lines}</ul>{extra}"
            "<h2>Speedups (green: over eager, blue: over torch.compile; log scale)</h2>"
            f"{_bars(camp['rows'])}<h2>Problems</h2><table><tr>{cols}</tr>{body}</table>"
            f"<h2>Rejection funnel, summed over the suite</h2>"
            f"{funnel_svg(summary.get('funnel') or {}) if summary.get('funnel') else '-'}"
            "</body></html>")
