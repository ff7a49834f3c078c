"""`kernelevolve report RUN --html FILE`: one self-contained HTML page for a run.

Input is the run summary dict that `kernelevolve show RUN --json` prints. The page has no external
resources (no CDN, no fonts, no script): inline CSS and inline SVG only, so it opens offline and can
be attached to a bug report. Sources and rationales come from LLMs and candidates, so every string
taken from the summary is HTML-escaped.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelevolve.report.summary import (RunSummary, calls_line, failure_line,
                                         measurement_notes)
from kernelevolve.report.tool_traffic import traffic_html
from kernelevolve.report.svg import (STAGE_COLORS, esc, fmt_x, funnel_svg, legend, node_kind,
                                     trajectory_svg, tree_svg)

CSS = """
:root{--fg:#111827;--muted:#6b7280;--line:#e5e7eb;--bg:#f9fafb;--card:#fff}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);
 font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}
h2{font-size:16px;margin:0 0 10px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:16px;
 margin:16px 0}
.muted{color:var(--muted)}
.mono,code,pre{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace}
.outcome{border-radius:6px;padding:10px 14px;font-size:16px;font-weight:600;margin:12px 0}
.outcome.improved{background:#dcfce7;color:#14532d;border:1px solid #86efac}
.outcome.none{background:#fef3c7;color:#78350f;border:1px solid #fcd34d}
.outcome.unknown{background:#f3f4f6;color:#374151;border:1px solid #d1d5db}
.warn{color:#92400e;font-weight:600}
.diff .dadd{color:#166534;background:#f0fdf4}.diff .ddel{color:#991b1b;background:#fef2f2}
.diff .dhunk{color:#6b7280}
.outcome.failed{background:#fee2e2;color:#7f1d1d;border:1px solid #fca5a5}
.stats{display:grid;grid-template-columns:repeat(auto-fit,minmax(128px,1fr));gap:10px}
.stat{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:8px 10px}
.stat b{display:block;font-size:17px}
.stat span{color:var(--muted);font-size:12px}
table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:#374151;background:var(--bg)}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
.scroll{overflow:auto;max-height:900px;border:1px solid var(--line);border-radius:6px;
 background:#fff}
svg text{font:11px ui-monospace,"DejaVu Sans Mono",Menlo,monospace}
svg.tree text{font-size:10px}
svg.plot .fdrop{fill:#b91c1c}
svg.tree .edge{fill:none;stroke:#9ca3af;stroke-width:1.2}
svg.tree .node:hover rect{stroke:#111827;stroke-width:2}
svg.plot .grid{stroke:#eef0f3}
svg.plot .axis{stroke:#6b7280}
svg.plot .tick{fill:#4b5563}
svg.plot .label{fill:#374151;font-size:12px}
svg.plot .baseline{stroke:#6b7280;stroke-dasharray:6 4}
svg.plot .best{fill:none;stroke:#16a34a;stroke-width:2}
svg.plot .ci{fill:#16a34a;opacity:.12}
svg.plot .flabel{fill:#374151;font-size:12px}
svg.plot .fcount{fill:#111827;font-size:12px}
.legend{display:flex;flex-wrap:wrap;gap:6px 14px;margin:0 0 10px;font-size:12px;color:#374151}
.key i{display:inline-block;width:12px;height:12px;border-radius:3px;margin-right:5px;
 vertical-align:-2px}
pre{background:#0f172a;color:#e2e8f0;padding:12px;border-radius:6px;overflow:auto;
 max-height:700px;font-size:12.5px;line-height:1.45;margin:0}
details>summary{cursor:pointer;color:#374151;margin:4px 0}
.kv td:first-child{color:var(--muted);white-space:nowrap;width:1%}
.kv td{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12.5px;
 word-break:break-word}
.dot{display:inline-block;width:9px;height:9px;border-radius:50%;margin-right:5px}
"""


def _fmt_elapsed(seconds: Any) -> str:
    if seconds is None:
        return "–"
    s = float(seconds)
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(int(round(s)), 60)
    h, m = divmod(m, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


def _fmt_created(ts: Any) -> str:
    try:
        return datetime.fromtimestamp(float(ts), tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (TypeError, ValueError, OverflowError, OSError):
        return "–"


def _fmt_cost(cost: dict | None) -> str:
    cost = cost or {}
    tokens = int(cost.get("tokens") or 0)
    if cost.get("dollars") is None:  # an unpriced model: unknown, never $0
        return f"{tokens:,} tokens, $ unknown" if tokens else "none"
    dollars = float(cost["dollars"])
    if not tokens and not dollars:
        return "none"
    return f"${dollars:.2f}" if dollars else f"{tokens:,} tokens"


def _cost_label(cost: dict | None) -> str:
    tokens = int((cost or {}).get("tokens") or 0)
    return f"cost · {tokens:,} tokens" if tokens else "cost"


def _num(value: Any, spec: str) -> str:
    return "–" if value is None else f"{value:{spec}}"


def _header(s: RunSummary) -> str:
    outcome = s.outcome or {}
    kind = outcome.get("kind")
    cls = {"improved": "improved", "no_safe_improvement": "none", "nothing_to_search": "none",
           "stopped_by_failures": "failed"}.get(kind, "unknown")
    message = outcome.get("message") or ("no outcome yet" if not kind else kind.replace("_", " "))
    best = s.best or {}
    failures = failure_line(s.llm_failures)
    calls = calls_line(s.cost)  # every LLM call, failure and re-send, by cause
    stats = [
        ("status", s.status or "–"),
        ("platform", s.platform or "–"),
        ("best", (f"#{best['node_id']} · {fmt_x(best.get('speedup'))}"
                  if best.get("node_id") is not None else "none")),
        ("evaluations", s.evaluations),
        ("accepted", (s.funnel or {}).get("accepted", 0)),
        ("elapsed", _fmt_elapsed(s.elapsed_s)),
        (_cost_label(s.cost), _fmt_cost(s.cost)),
    ]
    cards = "".join(f'<div class="stat"><span>{esc(k)}</span><b>{esc(v)}</b></div>'
                    for k, v in stats)
    return (f'<header><h1>kernelevolve run <span class="mono">{esc(s.run_id)}</span></h1>'
            f'<div class="muted">problem <span class="mono">{esc(s.problem or "–")}</span>'
            f' · started {esc(_fmt_created(s.created))}</div>'
            f'<div class="outcome {cls}" id="outcome">{esc(message)}</div>'
            + (f'<div class="outcome failed" id="llm-failures">{esc(failures)}</div>'
               if failures else "")
            + _compile_comparison(s) +
            f'<div class="stats">{cards}</div>'
            + "".join(f'<p class="{"warn" if n.startswith("warning") else "muted"}">'
                      f'{esc(n)}</p>' for n in measurement_notes(s))
            + (f'<p class="muted" id="llm-calls">{esc(calls)}</p>' if calls else "")
            + f'<p class="muted">stop reason: {esc(s.stop_reason or "–")}</p></header>')


def _compile_comparison(s: RunSummary) -> str:
    """The outcome over torch.compile, as `show` and `optimize` say it: once, when timed."""
    from kernelevolve.report.compile_compare import compile_line

    compared = compile_line(s.compile_comparison)
    return f'<p id="compile-comparison">{esc(compared)}</p>' if compared else ""


def _section(title: str, body: str, sid: str, note: str = "") -> str:
    note_html = f' <span class="muted" style="font-weight:400">{esc(note)}</span>' if note else ""
    return f'<section id="{sid}"><h2>{esc(title)}{note_html}</h2>{body}</section>'


def _tree_section(nodes: list[dict], best_id: int | None) -> str:
    kinds = [k for k in STAGE_COLORS if any(node_kind(n) == k for n in nodes)]
    body = tree_svg(nodes, best_id)
    if nodes:
        body = legend(kinds) + f'<div class="scroll">{body}</div>'
    return _section("Search tree", body, "tree",
                    f"{len(nodes)} nodes · columns are depth · labels are search-time fitness · "
                    "hover a node for its rationale")


def _trajectory_body(nodes: list[dict], best_id: int | None,
                     interval: list[float] | None) -> str:
    body = trajectory_svg(nodes, best_id, interval)
    kinds = [k for k in STAGE_COLORS if k != "root"
             and any(node_kind(n) == k and n.get("order") is not None for n in nodes)]
    return body + legend(kinds) if kinds else body


def _cases_table(cases: list[dict]) -> str:
    if not cases:
        return '<p class="muted">No per-case timings for the best kernel.</p>'
    from kernelevolve.harness.protocol.roofline import sol_text

    sol = any(c.get("sol_fraction") is not None for c in cases)
    head = ("<tr><th>case</th><th class=num>weight</th><th class=num>reference ms</th>"
            "<th class=num>candidate ms</th><th class=num>speedup</th>"
            + ("<th class=num>speed of light</th><th class=num>limit ms</th>"
               "<th class=num>GB/s</th><th class=num>GFLOP/s</th>" if sol else "") + "</tr>")
    rows = "".join(
        f"<tr><td class=mono>{esc(c.get('name'))}</td>"
        f"<td class=num>{esc(_num(c.get('weight'), 'g'))}</td>"
        f"<td class=num>{esc(_num(c.get('ref_ms'), '.4g'))}</td>"
        f"<td class=num>{esc(_num(c.get('cand_ms'), '.4g'))}</td>"
        f"<td class=num>{esc(fmt_x(c.get('speedup')))}</td>"
        + (f"<td class=num>{esc(sol_text(c))}</td>"
           f"<td class=num>{esc(_num(c.get('sol_ms'), '.3g'))}</td>"
           f"<td class=num>{esc(_num(c.get('achieved_gbs'), '.3g'))}</td>"
           f"<td class=num>{esc(_num(c.get('achieved_gflops'), '.3g'))}</td>" if sol else "")
        + "</tr>" for c in cases)
    return f"<table>{head}{rows}</table>"


def _best_section(s: RunSummary) -> str:
    best = s.best or {}
    if best.get("node_id") is None and not s.best_source:
        none = '<p class="muted">No candidate was accepted in this run.</p>'
        return _section("Best kernel", none, "best")
    src = s.best_source
    code = (f'<pre><code class="language-python">{esc(src)}</code></pre>' if src
            else '<p class="muted">Source not recorded.</p>')
    body = (_cases_table(s.best_cases or []) + '<h2 style="margin-top:14px">Source</h2>'
            + code + _diff_body(s.best_diff) + _logs_body(s.best_logs))
    return _section("Best kernel", body, "best",
                    f"node #{best.get('node_id')} · {fmt_x(best.get('speedup'))}")


def _logs_body(logs: dict | None) -> str:
    """What the best kernel printed, per stream (escapes shown, never acted on)."""
    if not logs:
        return ""
    blocks = "".join(f'<p class="muted">{esc(stream)}</p><pre><code>{esc(text)}</code></pre>'
                     for stream, text in sorted(logs.items()))
    return f'<h2 style="margin-top:14px">Its output</h2><div id="best-logs">{blocks}</div>'


def _reason_cell(node: dict) -> str:
    """A rejected node's reason: its first line, the whole of it folded beneath."""
    reason = (node.get("reason") or "").strip() if node.get("stage") != "accepted" else ""
    if not reason:
        return "<td></td>"
    first = reason.splitlines()[0][:160]
    return (f"<td><details><summary>{esc(first)}</summary>"
            f"<pre><code>{esc(reason)}</code></pre></details></td>")


def _diff_body(diff: dict | None) -> str:
    """The best kernel's changes from its parent, one span per line, coloured by its sign."""
    if not diff:
        return ""
    lines = []
    for line in (diff.get("diff") or "").splitlines():
        cls = ("add" if line.startswith("+") and not line.startswith("+++") else
               "del" if line.startswith("-") and not line.startswith("---") else
               "hunk" if line.startswith("@@") else "ctx")
        lines.append(f'<span class="d{cls}">{esc(line)}</span>')
    text = "\n".join(lines) if lines else '<span class="dctx">(identical sources)</span>'
    return (f'<h2 style="margin-top:14px">Changes from node #{esc(diff.get("parent"))}</h2>'
            f'<pre class="diff" id="best-diff"><code>{text}</code></pre>')


def _reference_section(s: RunSummary) -> str:
    src = s.reference_source
    if not src:
        return ""
    return _section("Reference", f'<pre><code class="language-python">{esc(src)}</code></pre>',
                    "reference", "the PyTorch module every candidate is measured against")


def _kv_table(data: dict | None, empty: str) -> str:
    if not data:
        return f'<p class="muted">{esc(empty)}</p>'
    rows = []
    for key in sorted(data, key=str):
        value = data[key]
        text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
        rows.append(f"<tr><td>{esc(key)}</td><td>{esc(text)}</td></tr>")
    return f'<table class="kv">{"".join(rows)}</table>'


def _nodes_table(nodes: list[dict], best_id: int | None) -> str:
    if not nodes:
        return ""
    head = ("<tr><th class=num>id</th><th>parents</th><th>operator</th><th>stage</th>"
            "<th class=num>search-time fitness</th><th class=num>speedup</th><th>rationale</th>"
            "<th>why rejected</th></tr>")
    rows = []
    for n in nodes:
        kind = node_kind(n)
        star = " ★" if n["id"] == best_id else ""
        rows.append(
            f"<tr><td class=num>{esc(n['id'])}{star}</td>"
            f"<td class=mono>{esc(', '.join(map(str, n.get('parents') or [])) or '–')}</td>"
            f"<td>{esc(n.get('operator') or '–')}</td>"
            f'<td><i class="dot" style="background:{STAGE_COLORS[kind]}"></i>'
            f"{esc(n.get('stage') or n.get('status') or '–')}</td>"
            f"<td class=num>{esc(_num(n.get('fitness'), '.3f'))}</td>"
            f"<td class=num>{esc(fmt_x(n.get('speedup')))}</td>"
            f"<td>{esc(n.get('rationale') or '')}</td>{_reason_cell(n)}</tr>")
    return (f"<details><summary>All {len(nodes)} nodes</summary>"
            f"<table>{head}{''.join(rows)}</table></details>")


def render_html(summary: RunSummary) -> str:
    """The whole report page for one run summary (what `kernelevolve show RUN --json` prints)."""
    s = summary
    nodes = [n for n in s.nodes if isinstance(n, dict) and "id" in n]
    best = s.best or {}
    best_id = best.get("node_id")
    outcome = s.outcome or {}
    interval = outcome.get("interval") if outcome.get("safe", outcome.get("kind") == "improved") \
        else None
    cost = s.cost or {}
    by_model = cost.get("by_model") or {}
    parts = [
        _header(s),
        _tree_section(nodes, best_id),
        _section("Fitness over evaluations", _trajectory_body(nodes, best_id, interval),
                 "trajectory", "search-time fitness · points: each evaluation (rejected at 0) · "
                 "line: best so far · dashed: baseline · the header's figure is the finalists' "
                 "re-measurement"),
        _section("Rejection funnel", funnel_svg(s.funnel or {})
                 if any((s.funnel or {}).get(k) for k in ("proposed", "llm", "generation"))
                 else
                 '<p class="muted">Nothing proposed yet.</p>', "funnel",
                 "what is left after each step; −N: lost there"),
        _best_section(s),
        _reference_section(s),
        _section("Synthesizer coverage", f"<pre><code>{esc(s.synth_coverage)}</code></pre>",
                 "synth", "which ops were fused into which kernels, which stayed in torch")
        if s.synth_coverage else "",
        _section("All nodes", _nodes_table(nodes, best_id) or
                 '<p class="muted">No nodes.</p>', "nodes"),
        _section("Agent tool calls", traffic_html(s.tool_traffic, esc), "tools",
                 "per proposal: each call's case, verdict, speedup and interval, seconds")
        if s.tool_traffic else "",
        _section("Cost by model", _kv_table(by_model, "No LLM calls."), "cost") if by_model else "",
        _section("Machine", "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in s.machine)
                 + "</ul>", "machine", "measured where the kernels were timed")
        if s.machine else "",
        _section("Platform fingerprint", _kv_table(s.fingerprint,
                 "No fingerprint recorded."), "fingerprint"),
    ]
    return ("<!doctype html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>kernelevolve run {esc(s.run_id or '?')}</title>"
            f"<style>{CSS}</style></head><body><main>"
            + "".join(parts)
            + '<footer class="muted">Generated by kernelevolve · self-contained, no external '
              "resources</footer></main></body></html>\n")


def write_html(summary: RunSummary, path: str | Path) -> Path:
    """Write the report to `path` (UTF-8), creating parent folders; returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_html(summary), encoding="utf-8")
    return out
