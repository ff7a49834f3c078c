"""Inline SVG plots for the HTML report: search tree, fitness trajectory, funnel.

Pure string building, no plotting library: the report must open offline and from a single file.
Every piece of text that came from a run (operators, rationales, stage names) goes through `esc`.
"""
from __future__ import annotations

import math
from html import escape
from typing import Any

from kernelevolve.harness.protocol.text import clean

# Red darkens with how late the gate fired: a timing rejection cost more work than a static one.
STAGE_COLORS = {
    "root": "#2563eb",
    "accepted": "#16a34a",
    "accepted_slow": "#86efac",   # accepted but slower than the baseline
    "generation": "#fecaca",
    "static": "#fca5a5",
    "load": "#f87171",
    "run": "#ef4444",
    "correctness": "#dc2626",
    "integrity": "#b91c1c",
    "timing": "#7f1d1d",
    "pending": "#9ca3af",
    "infra": "#a78bfa",
}
BEST_STROKE = "#f59e0b"


def esc(value: Any) -> str:
    """HTML-escaped, and control characters shown as escapes: clean already where candidate
    text entered the driver, but a run stored by an older version may not be, and the inline
    SVG is XML, which has no place for them."""
    return escape(clean("" if value is None else str(value)), quote=True)


def fmt_x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def node_kind(node: dict) -> str:
    """Colour key of a node, derived from its stage and status (never from a separate flag)."""
    stage, status = node.get("stage"), str(node.get("status") or "")
    if not node.get("parents") and (status == "root" or node.get("operator") == "reference"):
        return "root"
    if "infra" in status:
        return "infra"
    if stage == "accepted":
        speedup = node.get("speedup")
        return "accepted_slow" if speedup is not None and speedup < 1.0 else "accepted"
    if stage in STAGE_COLORS:
        return stage
    return "pending"


def legend(kinds: list[str]) -> str:
    labels = {"accepted_slow": "accepted (<1x)", "infra": "infra failed",
              "generation": "generation failed"}
    items = []
    for kind in kinds:
        items.append(f'<span class="key"><i style="background:{STAGE_COLORS[kind]}"></i>'
                     f'{esc(labels.get(kind, kind))}</span>')
    items.append(f'<span class="key"><i style="background:#fff;border:2px solid {BEST_STROKE}">'
                 '</i>best</span>')
    return '<div class="legend">' + "".join(items) + "</div>"


# ---------------------------------------------------------------------------------- search tree

def _tree_layout(nodes: list[dict]) -> tuple[dict[int, int], dict[int, float], dict[int, int]]:
    """Tidy layered layout: depth -> column, leaves take consecutive rows in depth-first order and a
    parent sits at the middle of its children. The first parent is the tree parent; further parents
    (crossover) get extra edges. Iterative, so a 1000-deep chain does not hit the recursion
    limit."""
    ids = [n["id"] for n in nodes]
    known = set(ids)
    primary: dict[int, int | None] = {}
    for n in nodes:
        parents = [p for p in (n.get("parents") or []) if p in known and p != n["id"]]
        primary[n["id"]] = parents[0] if parents else None
    children: dict[int | None, list[int]] = {}
    for i in ids:
        children.setdefault(primary[i], []).append(i)
    depth: dict[int, int] = {}
    row: dict[int, float] = {}
    next_row = 0
    placed: set[int] = set()
    roots = children.get(None, [])
    # A parent cycle leaves nodes unreachable from any root; lay them out as extra roots.
    for start in roots + [i for i in ids if i not in roots]:
        if start in placed:
            continue
        stack: list[tuple[int, int, bool]] = [(start, 0, False)]
        while stack:
            nid, d, done = stack.pop()
            if done:
                kids = [k for k in children.get(nid, []) if k in row and depth[k] == d + 1]
                if kids:
                    row[nid] = (row[kids[0]] + row[kids[-1]]) / 2
                else:
                    row[nid], next_row = next_row, next_row + 1
                continue
            if nid in placed:
                continue
            placed.add(nid)
            depth[nid] = d
            stack.append((nid, d, True))
            for kid in reversed(children.get(nid, [])):
                if kid not in placed:
                    stack.append((kid, d + 1, False))
    return depth, row, primary


def tree_svg(nodes: list[dict], best_id: int | None) -> str:
    if not nodes:
        return '<p class="muted">No nodes in this run.</p>'
    depth, row, primary = _tree_layout(nodes)
    col_w, row_h, box_w, box_h, pad = 120, 24, 100, 18, 12
    if len(nodes) > 150:  # big runs: tighter rows, so a screen shows more of the tree
        row_h, box_h = 20, 16
    n_cols = max(depth.values()) + 1
    n_rows = max(row.values()) + 1
    width = pad * 2 + (n_cols - 1) * col_w + box_w
    height = int(pad * 2 + (n_rows - 1) * row_h + box_h)

    def pos(nid: int) -> tuple[float, float]:
        return pad + depth[nid] * col_w, pad + row[nid] * row_h

    edges, boxes = [], []
    for n in nodes:
        cx, cy = pos(n["id"])
        for p in n.get("parents") or []:
            if p not in depth or p == n["id"]:
                continue
            px, py = pos(p)
            x1, y1, x2, y2 = px + box_w, py + box_h / 2, cx, cy + box_h / 2
            mid = (x1 + x2) / 2
            dash = "" if p == primary[n["id"]] else ' stroke-dasharray="4 3"'
            edges.append(f'<path class="edge" d="M{x1:.1f},{y1:.1f} C{mid:.1f},{y1:.1f} '
                         f'{mid:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"{dash}/>')
    for n in nodes:
        x, y = pos(n["id"])
        boxes.append(_tree_box(n, x, y, box_w, box_h, n["id"] == best_id))
    # Shrink to fit the page down to 80% (labels stay legible), then scroll.
    style = f"width:100%;max-width:{width}px;min-width:{int(width * 0.8)}px;height:auto"
    return (f'<svg class="tree" xmlns="http://www.w3.org/2000/svg" width="{width}" '
            f'height="{height}" viewBox="0 0 {width} {height}" style="{style}" role="img" '
            f'aria-label="search tree with {len(nodes)} nodes">'
            + "".join(edges) + "".join(boxes) + "</svg>")


def _tree_box(n: dict, x: float, y: float, box_w: int, box_h: int, is_best: bool) -> str:
    """One node of the tree: a coloured box, its short label and a tooltip with the details."""
    kind = node_kind(n)
    fill = STAGE_COLORS[kind]
    dark = kind in ("root", "accepted", "run", "correctness", "integrity", "timing", "infra")
    stroke = f' stroke="{BEST_STROKE}" stroke-width="3"' if is_best else ""
    if kind in ("root", "accepted", "accepted_slow"):
        tag = fmt_x(n.get("speedup") if n.get("speedup") is not None else n.get("fitness"))
    elif kind in ("pending", "infra"):
        tag = kind
    else:
        tag = str(n.get("stage"))
    label = f"{'★ ' if is_best else ''}#{n['id']} {tag}"[:16]
    tip = "\n".join([
        f"node #{n['id']}" + (" (best)" if is_best else ""),
        f"operator: {n.get('operator') or '-'}",
        f"parents: {', '.join(map(str, n.get('parents') or [])) or '-'}",
        f"stage: {n.get('stage') or n.get('status') or '-'}",
        f"fitness: {n.get('fitness') if n.get('fitness') is not None else '-'}"
        f" · speedup: {fmt_x(n.get('speedup'))}",
        f"rationale: {_clip(n.get('rationale'), 400)}",
    ])
    return (f'<g class="node" data-id="{esc(n["id"])}" data-kind="{kind}">'
            f"<title>{esc(tip)}</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{box_w}" height="{box_h}" rx="4" '
            f'fill="{fill}"{stroke}/>'
            f'<text x="{x + box_w / 2:.1f}" y="{y + box_h / 2 + 4:.1f}" text-anchor="middle" '
            f'fill="{"#fff" if dark else "#111827"}">{esc(label)}</text></g>')


def _clip(text: Any, limit: int) -> str:
    s = " ".join(str(text or "-").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


# ---------------------------------------------------------------------------------- trajectory

def nice_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(target, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, t = [], first
    while t <= hi + step * 1e-6:
        ticks.append(round(t, 10))
        t += step
    return ticks


def trajectory_svg(nodes: list[dict], best_id: int | None,
                   interval: list[float] | None = None) -> str:
    evaluated = sorted((n for n in nodes if n.get("order") is not None), key=lambda n: n["order"])
    if not evaluated:
        return '<p class="muted">No evaluations yet.</p>'
    W, H, ml, mr, mt, mb = 960, 320, 56, 20, 16, 44
    pw, ph = W - ml - mr, H - mt - mb
    fits = [float(n.get("fitness") or 0.0) if n.get("stage") == "accepted" else 0.0
            for n in evaluated]
    orders = [n["order"] for n in evaluated]
    x_lo, x_hi = min(orders), max(orders)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    y_hi = max(fits + [1.0] + (list(interval) if interval else []))
    y_ticks = nice_ticks(0.0, y_hi * 1.08, 5)
    y_top = max(y_ticks[-1], y_hi * 1.08)
    x_ticks = [t for t in nice_ticks(x_lo, x_hi, 8) if t == int(t)]
    x_pad = (x_hi - x_lo) * 0.02  # keep the first and last points off the axes
    x_lo, x_hi = x_lo - x_pad, x_hi + x_pad

    def sx(v: float) -> float:
        return ml + (v - x_lo) / (x_hi - x_lo) * pw

    def sy(v: float) -> float:
        return mt + ph - v / y_top * ph

    out = _plot_axes(sx, sy, x_ticks, y_ticks, (W, H, ml, mt, pw, ph))
    if interval and len(interval) == 2 and None not in interval:
        lo, hi = sorted(float(v) for v in interval)
        out.append(f'<rect class="ci" x="{ml}" width="{pw}" y="{sy(hi):.1f}" '
                   f'height="{max(sy(lo) - sy(hi), 1):.1f}"><title>confirmed 95% interval '
                   f"{lo:.2f}-{hi:.2f}</title></rect>")
    out.append(f'<line class="baseline" x1="{ml}" x2="{ml + pw}" y1="{sy(1):.1f}" '
               f'y2="{sy(1):.1f}"/>'
               f'<text class="tick" x="{ml + pw - 4}" y="{sy(1) - 5:.1f}" text-anchor="end">'
               "baseline 1.0</text>")
    out.append(_best_so_far(orders, fits, sx, sy))
    for n, o, f in zip(evaluated, orders, fits):
        kind = node_kind(n)
        ring = f' stroke="{BEST_STROKE}" stroke-width="3"' if n["id"] == best_id else ""
        r = 6 if n["id"] == best_id else 4 if len(evaluated) <= 100 else 3
        tip = f"#{n['id']} · evaluation {o} · {n.get('stage') or '-'} · fitness {f:.3g}"
        out.append(f'<circle class="pt" cx="{sx(o):.1f}" cy="{sy(f):.1f}" r="{r}" '
                   f'fill="{STAGE_COLORS[kind]}"{ring}><title>{esc(tip)}</title></circle>')
    out.append("</svg>")
    return "".join(out)


def _plot_axes(sx, sy, x_ticks: list[float], y_ticks: list[float],
               geometry: tuple) -> list[str]:
    """The trajectory plot's frame: grid, ticks, axes and their labels."""
    W, H, ml, mt, pw, ph = geometry
    out = [f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" '
           f'width="100%" role="img" aria-label="fitness over evaluations">']
    for t in y_ticks:
        out.append(f'<line class="grid" x1="{ml}" x2="{ml + pw}" y1="{sy(t):.1f}" '
                   f'y2="{sy(t):.1f}"/>'
                   f'<text class="tick" x="{ml - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">'
                   f"{t:g}</text>")
    for t in x_ticks:
        out.append(f'<line class="axis" x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{mt + ph}" '
                   f'y2="{mt + ph + 5}"/><text class="tick" x="{sx(t):.1f}" y="{mt + ph + 18}" '
                   f'text-anchor="middle">{int(t)}</text>')
    out.append(f'<line class="axis" x1="{ml}" x2="{ml}" y1="{mt}" y2="{mt + ph}"/>'
               f'<line class="axis" x1="{ml}" x2="{ml + pw}" y1="{mt + ph}" y2="{mt + ph}"/>')
    out.append(f'<text class="label" x="{ml + pw / 2}" y="{H - 6}" text-anchor="middle">'
               "evaluation (completion order)</text>"
               f'<text class="label" transform="translate(14,{mt + ph / 2}) rotate(-90)" '
               'text-anchor="middle">fitness (weighted speedup)</text>')
    return out


def _best_so_far(orders: list, fits: list[float], sx, sy) -> str:
    """The best fitness so far as a step line."""
    best, pts = 0.0, []
    for o, f in zip(orders, fits):
        if f > best or not pts:
            if pts:
                pts.append(f"{sx(o):.1f},{sy(best):.1f}")
            best = max(best, f)
            pts.append(f"{sx(o):.1f},{sy(best):.1f}")
    pts.append(f"{sx(orders[-1]):.1f},{sy(best):.1f}")
    return f'<polyline class="best" points="{" ".join(pts)}"/>'


# ---------------------------------------------------------------------------------- funnel

def funnel_rows(funnel: dict) -> list[tuple[str, int, int]]:
    """(label, survivors, dropped at this step) from the attempts to acceptance, the same
    steps `show` prints (store/funnel.py)."""
    from kernelevolve.store.funnel import survivors

    return survivors(funnel)


def funnel_svg(funnel: dict) -> str:
    rows = funnel_rows(funnel or {})
    W, row_h, label_w, right = 960, 26, 150, 150
    bar_w = W - label_w - right
    H = row_h * len(rows) + 8
    top = max(rows[0][1], 1)
    out = [f'<svg class="plot funnel" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" '
           f'width="100%" role="img" aria-label="rejection funnel">']
    for i, (label, count, dropped) in enumerate(rows):
        y = 4 + i * row_h
        w = bar_w * count / top
        color = {"accepted": "#16a34a", "attempts": "#2563eb", "candidates": "#2563eb"}.get(
            label, "#60a5fa")
        note = esc(count) + (f'<tspan class="fdrop" dx="10">−{esc(dropped)}</tspan>'
                             if dropped else "")
        out.append(f'<g class="frow"><text class="flabel" x="{label_w - 8}" y="{y + 17}" '
                   f'text-anchor="end">{esc(label)}</text>'
                   f'<rect x="{label_w}" y="{y + 3}" width="{max(w, 1.5):.1f}" '
                   f'height="{row_h - 6}" '
                   f'rx="3" fill="{color}"/>'
                   f'<text class="fcount" x="{label_w + max(w, 1.5) + 6:.1f}" y="{y + 17}">'
                   f"{note}</text></g>")
    out.append("</svg>")
    return "".join(out)
